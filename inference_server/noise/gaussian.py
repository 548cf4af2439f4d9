"""`gaussian` noise, the default: fresh seeded `torch.randn` per tensor.

Drawing it is most of a member's overhead on a CPU (about 5 ns per parameter per core); see table.py
for the cheaper kind. Values are the same for one seed on one device type (CPU and CUDA generators
differ).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from seedcast.proto.seeds import tensor_seed


def tensor_noise(
    seed: int,
    name: str,
    shape: torch.Size | tuple[int, ...],
    device: torch.device | str = "cpu",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Standard-normal float32 noise for the tensor `name` under member seed `seed`.

    `out` (float32, on `device`, of `shape`) is filled in place when given, to avoid an allocation.
    """
    generator = torch.Generator(device=device)
    generator.manual_seed(tensor_seed(seed, name))
    if out is not None:
        return torch.randn(shape, generator=generator, dtype=torch.float32, device=device, out=out)
    return torch.randn(shape, generator=generator, dtype=torch.float32, device=device)


class GaussianNoise:
    """Fresh seeded `torch.randn` noise per tensor (one chunk)."""

    kind = "gaussian"
    fresh = True

    def prepare(self, device: torch.device | str = "cpu") -> None:
        """Nothing to build."""

    def chunks(
        self, seed: int, name: str, numel: int, device: torch.device | str = "cpu", buffer: torch.Tensor | None = None
    ) -> Iterator[tuple[int, int, torch.Tensor]]:
        """One chunk: the whole flattened tensor's noise (randn fills a tensor in flat order, whatever its shape)."""
        yield 0, numel, tensor_noise(seed, name, (numel,), device, out=buffer)

    def noise(
        self, seed: int, name: str, shape: torch.Size | tuple[int, ...], device: torch.device | str = "cpu"
    ) -> torch.Tensor:
        """tensor_noise(seed, name, shape)."""
        return tensor_noise(seed, name, shape, device)


GAUSSIAN = GaussianNoise()
