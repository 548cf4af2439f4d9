"""The protocol every kind of noise implements: ε(seed, Hugging Face tensor name) as chunks.

Consumers read noise as chunks of the flattened tensor (`NoiseSource.chunks`): one chunk for
`gaussian`, table slices for `table`, so the same code path serves both. Each kind seeds a tensor's
noise with the shared seed hash (`proto/seeds.py`: `tensor_seed`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the protocol loads without torch
    import torch


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


def noise_from_chunks(
    source: NoiseSource, seed: int, name: str, shape: torch.Size | tuple[int, ...], device: torch.device | str = "cpu"
) -> torch.Tensor:
    """The whole noise tensor of `shape` assembled from `source.chunks`: the same bits every consumer reads."""
    import torch

    out = torch.empty(shape, dtype=torch.float32, device=device)
    flat = out.view(-1)
    for start, end, noise in source.chunks(seed, name, flat.numel(), device):
        flat[start:end].copy_(noise)
    return out
