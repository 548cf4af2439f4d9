"""Stochastic rounding of perturbed weights to bfloat16, with randomness that is a pure function of
(member seed, tensor name, chunk).

bf16 keeps 8 bits of mantissa: at σ = 1e-3 about a quarter of the noise entries round away when
added to typical weights (bench/noise_fidelity.py), so a member is evaluated at a perturbation
that is not σ·ε. Rounding stochastically (up with probability equal to the dropped fraction) makes
the cast unbiased: E[round(x)] = x, and small perturbations survive in expectation.

The float32 value is rounded in place by adding 16 random bits below bf16's mantissa and clearing
them, so the value is then exactly representable in bf16 and the ordinary cast that follows is
exact. On the sign-magnitude bit pattern this rounds the magnitude, which is unbiased for either
sign. Restores and updates never use it: they write cast(master), rounded to nearest.
"""

from __future__ import annotations

import torch

from seedcast.proto.seeds import tensor_seed

_LOW_BITS = 1 << 16  # float32 bits below bfloat16's mantissa
_KEEP_HIGH = -_LOW_BITS  # 0xFFFF0000 as a signed 32-bit mask


def rounding_seed(seed: int, name: str, start: int) -> int:
    """The seed of the rounding bits of one chunk (starting at flat index `start`) of tensor `name`."""
    return tensor_seed(seed, f"{name}#round#{start}")


def check_rounding_dtype(dtype: torch.dtype) -> None:
    """Stochastic rounding is defined for bfloat16 targets (and float32, where it leaves values alone)."""
    if dtype not in (torch.bfloat16, torch.float32):
        raise ValueError(f"stochastic rounding supports bfloat16 (or float32) inference weights, not {dtype}")


def stochastic_round_to_bf16_(values: torch.Tensor, seed: int) -> torch.Tensor:
    """Round float32 `values` in place to bf16-representable floats, stochastically; returns `values`."""
    generator = torch.Generator(device=values.device)
    generator.manual_seed(seed)
    noise = torch.randint(0, _LOW_BITS, values.shape, generator=generator, dtype=torch.int32, device=values.device)
    bits = values.view(torch.int32)
    bits.add_(noise).bitwise_and_(_KEEP_HIGH)
    return values
