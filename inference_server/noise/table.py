"""`table` noise: ε(seed, name) read as slices of one fixed table of Gaussian samples.

Drawing fresh Gaussian noise for every parameter is the main cost of a perturbation on a CPU
(about 5 ns per parameter per core). Large-scale ES avoids it with a shared noise table (Salimans et
al., 2017): every worker holds the same table of samples, and a perturbation is a set of offsets
into it. Here the flattened tensor is cut into chunks of CHUNK_ENTRIES; each chunk is the slice of
the table at an offset hashed from (seed, name, chunk index). A perturbation is then a memory-bound
add, about 3× cheaper than `torch.randn` on the development machine (bench/member_overhead.py).

The table (TABLE_ENTRIES float32 samples, 64 MiB) is a pure function of TABLE_SEED, drawn on the CPU
and copied to other devices, so unlike `gaussian` noise it is the same on every device type. Every
coordinate of a chunk is an independent N(0, 1) sample; two chunks share values only where their
slices overlap, with probability about CHUNK_ENTRIES / TABLE_ENTRIES per pair, and then at shifted
positions, so cross-coordinate correlations are of order 1 / TABLE_ENTRIES.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import torch

from seedcast.inference_server.noise.source import noise_from_chunks
from seedcast.proto.seeds import tensor_seed

TABLE_ENTRIES = 1 << 24
CHUNK_ENTRIES = 1 << 18
TABLE_SEED = 0x5EEDCA57


class NoiseTable:
    """The `table` noise source; use `shared_noise_table()` so a process builds the table once."""

    kind = "table"
    fresh = False

    def __init__(self) -> None:
        self._tables: dict[torch.device, torch.Tensor] = {}
        self._lock = threading.Lock()  # perturbations ask from several noise threads at once

    def prepare(self, device: torch.device | str = "cpu") -> None:
        """Build the table on `device` now."""
        self.table(device)

    def table(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """The table on `device` (built on first use: about 0.2 s on a CPU core)."""
        device = torch.device(device)
        with self._lock:
            if device not in self._tables:
                cpu = self._tables.get(torch.device("cpu"))
                if cpu is None:
                    generator = torch.Generator().manual_seed(TABLE_SEED)
                    cpu = torch.randn(TABLE_ENTRIES, generator=generator, dtype=torch.float32)
                    self._tables[torch.device("cpu")] = cpu
                self._tables[device] = cpu.to(device)
            return self._tables[device]

    @staticmethod
    def offset(seed: int, name: str, chunk: int) -> int:
        """Where chunk `chunk` of tensor `name` starts in the table under member seed `seed`."""
        return tensor_seed(seed, f"{name}#{chunk}") % (TABLE_ENTRIES - CHUNK_ENTRIES + 1)

    def chunks(
        self, seed: int, name: str, numel: int, device: torch.device | str = "cpu", buffer: torch.Tensor | None = None
    ) -> Iterator[tuple[int, int, torch.Tensor]]:
        """(start, end, read-only table slice) per chunk of the flattened tensor; `buffer` is not needed."""
        table = self.table(device)
        for chunk, start in enumerate(range(0, numel, CHUNK_ENTRIES)):
            end = min(numel, start + CHUNK_ENTRIES)
            offset = self.offset(seed, name, chunk)
            yield start, end, table[offset : offset + end - start]

    def noise(
        self, seed: int, name: str, shape: torch.Size | tuple[int, ...], device: torch.device | str = "cpu"
    ) -> torch.Tensor:
        """The whole noise tensor, assembled from its chunks."""
        return noise_from_chunks(self, seed, name, shape, device)


_SHARED = NoiseTable()


def shared_noise_table() -> NoiseTable:
    """The process-wide table source."""
    return _SHARED
