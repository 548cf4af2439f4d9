"""The one seed hash of Seedcast, and the protocol every kind of noise implements.

Per-tensor seeds come from a stable hash of the member seed and the Hugging Face parameter name, so
two tensors of the same shape never share noise, and a backend that fuses tensors (vLLM's
`qkv_proj`) can rebuild each piece by its HF name. The optimizer derives every seed of a run (members,
sampling, minibatches) from the same hash (`stable_seed`).

Consumers read noise as chunks of the flattened tensor (`NoiseSource.chunks`): one chunk for
`gaussian`, table slices for `table`, so the same code path serves both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the seed hash and the kind names load without torch
    import torch

SEED_BITS = 63  # seeds fit a signed 64-bit integer (torch generators, protobuf int64)
_SEED_MASK = (1 << SEED_BITS) - 1


def stable_seed(key: str) -> int:
    """A 63-bit seed that is a pure function of `key` (blake2b), the same in every process and machine."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little") & _SEED_MASK


def tensor_seed(seed: int, name: str) -> int:
    """The generator seed for one tensor: a stable 63-bit hash of the member seed and the HF name."""
    return stable_seed(f"{seed}:{name}")


class NoiseSource(Protocol):
    """Where a run's noise comes from: ε(seed, name) as chunks of the flattened tensor."""

    kind: str
    fresh: bool  # chunks are new tensors the caller may overwrite (else read-only views)

    def prepare(self, device: torch.device | str = "cpu") -> None:
        """Build what the source needs on `device` now (at server start), not on the first member."""

    def chunks(
        self, seed: int, name: str, numel: int, device: torch.device | str = "cpu", buffer: torch.Tensor | None = None
    ) -> Iterator[tuple[int, int, torch.Tensor]]:
        """(start, end, ε[start:end]) covering 0..numel in order; the tensors are read-only (they may be
        views of shared storage). `buffer` (float32, numel elements) may be filled instead of allocating."""

    def noise(
        self, seed: int, name: str, shape: torch.Size | tuple[int, ...], device: torch.device | str = "cpu"
    ) -> torch.Tensor:
        """The whole noise tensor (a fresh float32 tensor of `shape`)."""
