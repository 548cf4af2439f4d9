"""Seeded Gaussian noise: a pure function of (seed, canonical tensor name, shape).

Every backend and the exporter build perturbations and updates from this module, so a seed means
the same perturbation everywhere (on one device type). Per-tensor seeds come from a stable hash of
the member seed and the Hugging Face parameter name, so two tensors of the same shape never share
noise, and a backend that fuses tensors (vLLM's `qkv_proj`) can rebuild each piece by its HF name.

Noise is generated tensor by tensor on a small thread pool (`torch.randn` releases the GIL), which
halves the wall time on two cores and keeps the peak extra memory at one tensor per thread.

Two kinds of noise, chosen per run (`es.noise`, `seedcast serve --noise`), never mixed in one run:

- `gaussian` (the default): fresh `torch.randn` per tensor, seeded by `tensor_seed`. Drawing it is
  most of a member's overhead on a CPU (about 5 ns per parameter per core).
- `table`: slices of one fixed table of Gaussian samples (noise_table.py), the "shared noise table"
  of large-scale ES. A perturbation is then a memory-bound add, about 3× cheaper on a CPU.

Consumers read noise as chunks of the flattened tensor (`NoiseSource.chunks`): one chunk for
`gaussian`, table slices for `table`, so the same code path serves both.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import torch

_SEED_MASK = (1 << 63) - 1
NOISE_KINDS = ("gaussian", "table")


def tensor_seed(seed: int, name: str) -> int:
    """The generator seed for one tensor: a stable 63-bit hash of the member seed and the HF name."""
    digest = hashlib.blake2b(f"{seed}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & _SEED_MASK


def tensor_noise(seed: int, name: str, shape: torch.Size | tuple[int, ...], device: torch.device | str = "cpu",
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Standard-normal float32 noise for the tensor `name` under member seed `seed`.

    `out` (float32, on `device`, of `shape`) is filled in place when given, to avoid an allocation.
    """
    generator = torch.Generator(device=device)
    generator.manual_seed(tensor_seed(seed, name))
    if out is not None:
        return torch.randn(shape, generator=generator, dtype=torch.float32, device=device, out=out)
    return torch.randn(shape, generator=generator, dtype=torch.float32, device=device)


class NoiseSource(Protocol):
    """Where a run's noise comes from: ε(seed, name) as chunks of the flattened tensor."""

    kind: str
    fresh: bool  # chunks are new tensors the caller may overwrite (else read-only views)

    def prepare(self, device: torch.device | str = "cpu") -> None:
        """Build what the source needs on `device` now (at server start), not on the first member."""

    def chunks(self, seed: int, name: str, numel: int, device: torch.device | str = "cpu",
               buffer: torch.Tensor | None = None) -> Iterator[tuple[int, int, torch.Tensor]]:
        """(start, end, ε[start:end]) covering 0..numel in order; the tensors are read-only (they may be
        views of shared storage). `buffer` (float32, numel elements) may be filled instead of allocating."""

    def noise(self, seed: int, name: str, shape: torch.Size | tuple[int, ...],
              device: torch.device | str = "cpu") -> torch.Tensor:
        """The whole noise tensor (a fresh float32 tensor of `shape`)."""


class GaussianNoise:
    """Fresh seeded `torch.randn` noise per tensor (one chunk)."""

    kind = "gaussian"
    fresh = True

    def prepare(self, device: torch.device | str = "cpu") -> None:
        """Nothing to build."""

    def chunks(self, seed: int, name: str, numel: int, device: torch.device | str = "cpu",
               buffer: torch.Tensor | None = None) -> Iterator[tuple[int, int, torch.Tensor]]:
        """One chunk: the whole flattened tensor's noise (randn fills a tensor in flat order, whatever its shape)."""
        yield 0, numel, tensor_noise(seed, name, (numel,), device, out=buffer)

    def noise(self, seed: int, name: str, shape: torch.Size | tuple[int, ...],
              device: torch.device | str = "cpu") -> torch.Tensor:
        """tensor_noise(seed, name, shape)."""
        return tensor_noise(seed, name, shape, device)


GAUSSIAN = GaussianNoise()


def noise_source(kind: str) -> NoiseSource:
    """The source for a noise kind ("gaussian" or "table"); the table is built once per process."""
    if kind == "gaussian":
        return GAUSSIAN
    if kind == "table":
        from seedcast.inference_server.noise_table import shared_noise_table

        return shared_noise_table()
    raise ValueError(f"unknown noise kind {kind!r}; choose one of {', '.join(NOISE_KINDS)}")


def write_perturbed(master: torch.Tensor, source: NoiseSource, seed: int, name: str, scale: float,
                    targets: list[tuple[torch.Tensor, int]]) -> None:
    """For each (target, sign): target = cast(master + sign·scale·ε), from one noise draw.

    Computed per chunk as (scale·ε) + master, and master − (scale·ε) for sign −1 (negating is exact, so
    the mirrored partner gets the bits a separate perturbation would give). Tensors must be contiguous.
    """
    flat = master.view(-1)
    outs = sorted(((target.view(-1), sign) for target, sign in targets), key=lambda item: item[1])  # −1 first
    for start, end, noise in source.chunks(seed, name, flat.numel(), flat.device):
        step = noise.mul_(scale) if source.fresh else noise.mul(scale)
        piece = flat[start:end]
        for out, sign in outs:  # a +1 target last: it reuses `step` in place
            if sign < 0:
                out[start:end].copy_(torch.sub(piece, step))
            else:
                out[start:end].copy_(step.add_(piece))


def perturbed_master(master: torch.Tensor, source: NoiseSource, seed: int, name: str, scale: float) -> torch.Tensor:
    """A fresh float32 tensor master + scale·ε, computed as (scale·ε) + master like write_perturbed."""
    if source.fresh:  # the noise tensors themselves take the result: no second full-size tensor
        flat = master.view(-1)
        pieces = [noise.mul_(scale).add_(flat[start:end])
                  for start, end, noise in source.chunks(seed, name, flat.numel(), flat.device)]
        return (pieces[0] if len(pieces) == 1 else torch.cat(pieces)).view_as(master)
    out = torch.empty_like(master, dtype=torch.float32)
    write_perturbed(master, source, seed, name, scale, [(out, 1)])
    return out


def default_noise_threads() -> int:
    """Threads used for noise generation: all cores torch may use, at most 8."""
    return max(1, min(8, torch.get_num_threads(), os.cpu_count() or 1))


def for_each_tensor(names: Iterable[str], work: Callable[[str], None], threads: int | None = None) -> None:
    """Run `work(name)` for every name, on a thread pool; re-raises the first error."""
    names = list(names)
    threads = threads or default_noise_threads()
    if threads == 1 or len(names) == 1:
        for name in names:
            work(name)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="seedcast-noise") as pool:
        for future in [pool.submit(work, name) for name in names]:
            future.result()


def apply_update_terms(master: Mapping[str, torch.Tensor], terms: list[tuple[int, float]],
                       threads: int | None = None, source: NoiseSource = GAUSSIAN) -> None:
    """master[name] += sum(coeff * noise(seed, name)) for every tensor, in float32, terms in order.

    The order of the terms is fixed, so a live update and a replay of the log give identical bits.
    """

    def update_one(name: str) -> None:
        flat = master[name].view(-1)
        buffer = torch.empty_like(flat, dtype=torch.float32) if source.fresh else None
        for seed, coeff in terms:
            for start, end, noise in source.chunks(seed, name, flat.numel(), flat.device, buffer):
                flat[start:end].add_(noise, alpha=coeff)

    for_each_tensor(master.keys(), update_one, threads)


def weights_fingerprint(named_tensors: Iterator[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor]) -> str:
    """A SHA-256 over names, shapes, dtypes and bytes of the tensors, in name order (hex, 16 chars).

    Two replicas with the same base and the same update log have the same fingerprint.
    """
    items = sorted(named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors)
    digest = hashlib.sha256()
    for name, tensor in items:
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}|".encode())
        digest.update(memoryview(flat.view(torch.uint8).numpy()))
    return digest.hexdigest()[:16]
