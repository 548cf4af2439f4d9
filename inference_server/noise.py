"""Seeded Gaussian noise: a pure function of (seed, canonical tensor name, shape).

Every backend and the exporter build perturbations and updates from this module, so a seed means
the same perturbation everywhere (on one device type). Per-tensor seeds come from a stable hash of
the member seed and the Hugging Face parameter name, so two tensors of the same shape never share
noise, and a backend that fuses tensors (vLLM's `qkv_proj`) can rebuild each piece by its HF name.

Noise is generated tensor by tensor on a small thread pool (`torch.randn` releases the GIL), which
halves the wall time on two cores and keeps the peak extra memory at one tensor per thread.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import torch

_SEED_MASK = (1 << 63) - 1


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
                       threads: int | None = None) -> None:
    """master[name] += sum(coeff * noise(seed, name)) for every tensor, in float32, terms in order.

    The order of the terms is fixed, so a live update and a replay of the log give identical bits.
    """

    def update_one(name: str) -> None:
        tensor = master[name]
        buffer = torch.empty_like(tensor, dtype=torch.float32)
        for seed, coeff in terms:
            tensor_noise(seed, name, tensor.shape, tensor.device, out=buffer)
            tensor.add_(buffer, alpha=coeff)

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
