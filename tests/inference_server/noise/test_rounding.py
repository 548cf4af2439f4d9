"""Stochastic rounding of perturbed weights (es.rounding=stochastic): unbiased, a pure function of the seed."""

from __future__ import annotations

import pytest
import torch

from seedcast.inference_server.noise.apply import perturbed_master, write_perturbed
from seedcast.inference_server.noise.kinds import NOISE_KINDS, noise_source
from seedcast.inference_server.noise.rounding import stochastic_round_to_bf16_


def test_stochastic_rounding_is_unbiased_and_lands_on_bfloat16_values():
    value = torch.full((200_000,), 1.0 + 2**-10, dtype=torch.float32)  # a quarter of the way between bf16 values
    rounded = stochastic_round_to_bf16_(value.clone(), seed=5)
    assert torch.equal(rounded.to(torch.bfloat16).float(), rounded)  # exactly representable
    assert set(rounded.unique().tolist()) == {1.0, 1.0 + 2**-7}
    assert (rounded > 1.0).float().mean().item() == pytest.approx(0.125, abs=0.005)  # 2^-10 / 2^-7
    assert rounded.mean().item() == pytest.approx(value[0].item(), abs=2e-5)
    negative = stochastic_round_to_bf16_(-value.clone(), seed=5)
    assert torch.equal(negative, -rounded)  # the magnitude is rounded, for either sign
    assert torch.equal(stochastic_round_to_bf16_(value.clone(), seed=5), rounded)
    assert not torch.equal(stochastic_round_to_bf16_(value.clone(), seed=6), rounded)


@pytest.mark.parametrize("noise", NOISE_KINDS)
def test_stochastic_perturbations_are_a_pure_function_of_the_seed_for_both_signs(noise):
    source = noise_source(noise)
    master = torch.randn(3 * 2**18 + 5, generator=torch.Generator().manual_seed(1))  # several table chunks
    plus, minus = torch.empty_like(master, dtype=torch.bfloat16), torch.empty_like(master, dtype=torch.bfloat16)
    write_perturbed(master, source, 9, "w", 1e-3, [(plus, 1), (minus, -1)], torch.bfloat16)
    alone = torch.empty_like(minus)
    write_perturbed(master, source, 9, "w", -1e-3, [(alone, 1)], torch.bfloat16)
    assert torch.equal(alone, minus)  # the pair cache's partner = a separate perturbation, bit for bit
    fp32 = perturbed_master(master, source, 9, "w", 1e-3, round_for=torch.bfloat16)
    assert torch.equal(fp32.to(torch.bfloat16), plus)  # the vllm worker's path gives the same weights
    nearest = torch.empty_like(plus)
    write_perturbed(master, source, 9, "w", 1e-3, [(nearest, 1)])
    assert not torch.equal(nearest, plus)
    exact = master + 1e-3 * source.noise(9, "w", master.shape)
    # Nearest rounding loses small perturbations systematically; stochastic rounding keeps them on average.
    assert (plus.float() - exact).mean().abs() < (nearest.float() - exact).abs().mean() / 20
