"""Low-rank perturbations (EGGROLL, Sarkar et al. 2025): ε(seed, W) = A·Bᵀ/√r for every 2-D weight.

A member's noise for an m×n weight W is E = A Bᵀ / √r with A (m×r) and B (n×r) standard normal, drawn
from the run's noise kind under the names `W:lowrank-a` and `W:lowrank-b`: each entry of E is still a
unit-variance sample, so σ keeps its meaning. 1-D tensors (norm scales, biases) and anything not 2-D get
the run's ordinary full-rank noise under their own name, exactly as full-rank ES gives them. Embeddings
and a tied LM head are one 2-D tensor under one name, so both uses see the same E.

Why: a low-rank member's forward pass is W x + σ A (Bᵀ x)/√r, a shared matmul plus a small correction,
so many members can share one batched generation (batched_members.py). The update Σ cᵢ Aᵢ Bᵢᵀ/√r is a sum
of many rank-r terms and moves every weight.

`LowRankNoise` is a NoiseSource: perturbations, restores, updates and the pair cache run through the same
code as full-rank noise (noise/apply.py). A 2-D tensor's noise comes in row blocks of about CHUNK_ENTRIES
entries, each computed as A[rows] @ Bᵀ, whose bits equal the same rows of the whole product.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import torch

from seedcast.inference_server.noise.source import NoiseSource, noise_from_chunks

CHUNK_ENTRIES = 1 << 18  # entries per row block: 1 MiB of float32 noise at a time
FACTOR_SUFFIXES = (":lowrank-a", ":lowrank-b")


class LowRankNoise:
    """The run's noise kind `base`, with every 2-D tensor's noise replaced by A·Bᵀ/√r of rank `rank`."""

    fresh = True  # 2-D chunks are new tensors; 1-D chunks are copied when the base's are read-only

    def __init__(
        self,
        base: NoiseSource,
        rank: int,
        shapes: Mapping[str, torch.Size | tuple[int, ...]],
        frozen: frozenset[str] = frozenset(),
    ) -> None:
        if rank < 1:
            raise ValueError(f"a low-rank perturbation needs rank >= 1, got {rank}")
        self.base = base
        self.frozen = frozen  # tensors this perturbation leaves alone (es.lowrank_targets): zero noise
        self.kind = base.kind
        self.rank = rank
        self.scale = 1.0 / math.sqrt(rank)
        self.shapes = {name: tuple(shape) for name, shape in shapes.items()}

    def prepare(self, device: torch.device | str = "cpu") -> None:
        """Build the base source's state (the noise table) on `device`."""
        self.base.prepare(device)

    def is_low_rank(self, name: str) -> bool:
        """Whether tensor `name` gets A·Bᵀ/√r (2-D, not frozen) rather than full-rank noise or none."""
        return len(self.shapes.get(name, ())) == 2 and name not in self.frozen

    def factors(self, seed: int, name: str, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """(A, B) of a 2-D tensor under member seed `seed`: float32, m×r and n×r."""
        rows, columns = self.shapes[name]
        a = self.base.noise(seed, name + FACTOR_SUFFIXES[0], (rows, self.rank), device)
        b = self.base.noise(seed, name + FACTOR_SUFFIXES[1], (columns, self.rank), device)
        return a, b

    def chunks(
        self, seed: int, name: str, numel: int, device: torch.device | str = "cpu", buffer: torch.Tensor | None = None
    ) -> Iterator[tuple[int, int, torch.Tensor]]:
        """(start, end, ε[start:end]) in row blocks for a 2-D tensor, the base's chunks otherwise, zeros for a
        frozen one."""
        if name in self.frozen:
            zeros = buffer.zero_() if buffer is not None else torch.zeros(numel, device=device)
            yield 0, numel, zeros
            return
        if not self.is_low_rank(name):
            for start, end, noise in self.base.chunks(seed, name, numel, device, buffer):
                yield start, end, noise if self.base.fresh else noise.clone()
            return
        rows, columns = self.shapes[name]
        if rows * columns != numel:
            raise ValueError(f"tensor {name} has {numel} entries, not the {rows}x{columns} it was registered with")
        a, b = self.factors(seed, name, device)
        b_transposed = b.t()
        block = max(1, CHUNK_ENTRIES // columns)
        for first in range(0, rows, block):
            last = min(rows, first + block)
            start, end = first * columns, last * columns
            out = buffer[start:end].view(last - first, columns) if buffer is not None else None
            piece = torch.mm(a[first:last], b_transposed, out=out)
            if self.scale != 1.0:
                piece.mul_(self.scale)
            yield start, end, piece.view(-1)

    def noise(
        self, seed: int, name: str, shape: torch.Size | tuple[int, ...], device: torch.device | str = "cpu"
    ) -> torch.Tensor:
        """The whole noise tensor of `shape`, assembled from its chunks (the same bits)."""
        return noise_from_chunks(self, seed, name, shape, device)


def noise_of_rank(
    base: NoiseSource, rank: int, shapes: Mapping[str, torch.Tensor], frozen: frozenset[str] = frozenset()
) -> NoiseSource:
    """The source a member or step of perturbation rank `rank` uses: `base` for 0 (full rank), else low-rank
    noise over the tensors of `shapes` (a name → tensor mapping such as the master), zero on `frozen` ones."""
    if rank == 0:
        return base
    return LowRankNoise(base, rank, {name: tensor.shape for name, tensor in shapes.items()}, frozen)


def frozen_tensors(targets: str, shapes: Mapping[str, torch.Tensor], vocab_size: int) -> frozenset[str]:
    """The tensors low-rank members of `targets` (kinds.LOWRANK_TARGETS) leave alone: none for "all"; for "linear"
    every tensor but the 2-D projection weights, i.e. 1-D tensors and the 2-D ones whose first dimension is the
    vocabulary (the token embedding, the LM head)."""
    if targets == "all":
        return frozenset()
    if targets != "linear":
        raise ValueError(f"unknown low-rank targets {targets!r}; choose all or linear")
    return frozenset(name for name, tensor in shapes.items() if tensor.dim() != 2 or tensor.shape[0] == vocab_size)
