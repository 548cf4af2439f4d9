"""The ES options of a stronger ES: per-prompt fitness, momentum in seed space, stochastic rounding, and
fitness on sampled answers, each end to end over real gRPC, reproducible bit for bit."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
import torch

from seedcast.cli import main
from seedcast.inference_server.noise.apply import apply_update_terms, perturbed_master, write_perturbed
from seedcast.inference_server.noise.kinds import NOISE_KINDS, noise_source
from seedcast.inference_server.noise.rounding import stochastic_round_to_bf16_
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.fitness import mean_fitness, member_fitness, per_prompt_fitness
from seedcast.optimizer.es.shaping import z_score
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.reward_bytes import decode_rewards, encode_rewards
from tests.test_end_to_end import _overrides


# ----- per-prompt fitness ---------------------------------------------------------------------
def test_per_prompt_fitness_gives_every_prompt_the_same_weight_however_its_rewards_spread():
    rewards = {0: [1.0, 0.0, 0.3], 1: [0.0, 1.0, 0.2], 2: [0.5, 0.5, 0.9], 3: [0.2, 0.1, 0.0]}
    # Prompt 0's rewards squeezed into [0.5, 0.55] (an easy prompt where members barely differ): the mean
    # stops listening to it, the per-prompt fitness does not change.
    squeezed = {m: [0.5 + 0.05 * r[0], *r[1:]] for m, r in rewards.items()}
    assert per_prompt_fitness(squeezed) == pytest.approx(per_prompt_fitness(rewards))
    order = lambda fitness: sorted(fitness, key=fitness.get)  # noqa: E731
    assert order(mean_fitness(squeezed)) != order(mean_fitness(rewards))


def test_centring_alone_would_change_nothing_after_z_scoring():
    rewards = {0: [1.0, 0.2, 0.0], 1: [0.5, 0.1, 1.0], 2: [0.0, 0.3, 0.5]}
    mean = mean_fitness(rewards)
    centred = {m: mean[m] - 0.37 for m in mean}  # what per-prompt centring does to every member alike
    assert z_score(np.array(list(mean.values()))) == pytest.approx(z_score(np.array(list(centred.values()))))


def test_per_prompt_fitness_skips_unscorable_and_uniform_prompts():
    fitness = per_prompt_fitness({0: [1.0, math.nan, 1.0], 1: [0.0, 1.0, 1.0], 2: [0.5, 0.0, 1.0]})
    assert fitness[0] == pytest.approx(math.sqrt(1.5) / 2)  # prompt 2 (all 1.0) adds 0, prompt 1 is NaN for it
    assert member_fitness({0: [math.nan]}, "per_prompt")[0] != member_fitness({0: [math.nan]}, "per_prompt")[0]
    with pytest.raises(ValueError, match="unknown fitness mode"):
        member_fitness({}, "median")


def test_a_result_for_256_prompts_fits_in_512_bytes_with_one_byte_per_prompt():
    rewards = [i / 255 for i in range(255)] + [math.nan]
    assert decode_rewards(encode_rewards(rewards))[:255] == pytest.approx(rewards[:255], abs=0.5 / 254)
    assert math.isnan(decode_rewards(encode_rewards(rewards))[255])
    assert decode_rewards(encode_rewards([0.0, 0.5, 1.0])) == [0.0, 0.5, 1.0]  # exact for k/2 rewards
    result = pb.MemberResult(
        iteration=2**40,
        member=255,
        reward_mean=0.123456789,
        prompts_scored=256,
        total_completion_tokens=2**30,
        prompt_rewards_q8=encode_rewards(rewards),
        timings=pb.Timings(perturb_seconds=0.1, generate_seconds=12.5, score_seconds=0.01, restore_seconds=0.02),
    )
    assert pb.EvaluateResponse(result=result).ByteSize() <= 512


# ----- momentum -------------------------------------------------------------------------------
def test_momentum_is_a_float32_velocity_rebuilt_from_the_log():
    master = {"a": torch.randn(300, generator=torch.Generator().manual_seed(0)), "b": torch.zeros(7)}
    start = {name: tensor.clone() for name, tensor in master.items()}
    steps = [[(1, 0.1), (2, -0.05)], [(3, 0.2)], [(4, 0.07), (1, 0.01)]]
    velocity: dict = {}
    for terms in steps:
        apply_update_terms(master, terms, threads=2, momentum=0.9, velocity=velocity)
    expected = {name: tensor.clone() for name, tensor in start.items()}
    expected_velocity = {name: torch.zeros_like(tensor) for name, tensor in start.items()}
    gaussian = noise_source("gaussian")
    for terms in steps:
        for name in expected:
            expected_velocity[name].mul_(0.9)
            for seed, coeff in terms:
                expected_velocity[name].add_(gaussian.noise(seed, name, expected[name].shape), alpha=coeff)
            expected[name].add_(expected_velocity[name])
    for name in master:
        assert torch.equal(master[name], expected[name]) and torch.equal(velocity[name], expected_velocity[name])
    with pytest.raises(ValueError, match="velocity"):
        apply_update_terms(master, steps[0], momentum=0.5)


# ----- stochastic rounding --------------------------------------------------------------------
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


# ----- end to end -----------------------------------------------------------------------------
def _train(path, overrides):
    config = load_config(overrides=overrides)
    run = RunDirectory.create(path, config)
    return run, asyncio.run(Trainer(config, run, show_progress=False).train())


STRONG = {
    "es.fitness": "per_prompt",
    "es.momentum": 0.8,
    "es.rounding": "stochastic",
    "sampling.samples_per_prompt": 2,
    "fleet.pair_cache": "true",
    "eval_every": 0,
    "iterations": 3,
}


def test_all_options_together_reproduce_bit_for_bit_and_resume_and_export_to_the_servers_weights(
    tmp_path, tiny_model_dir
):
    overrides = _overrides(tiny_model_dir, **STRONG)
    first_run, first = _train(tmp_path / "first", overrides)
    assert all(step.rule == "momentum" and step.params == {"momentum": 0.8} for step in first_run.updates())
    assert all(r.update_terms > 0 for r in first.metrics)
    assert all(0 <= r.reward_min <= r.reward_max <= 1 for r in first.metrics)  # raw rewards, not normalised fitness
    # On one server instead of two, interrupted after 2 iterations and resumed: the same log, the same weights.
    part = [o for o in overrides if not o.startswith(("iterations=", "fleet.local="))]
    part_run, _ = _train(tmp_path / "part", [*part, "iterations=2", "fleet.local=1"])
    assert main(["train", "--resume", str(part_run.path), "--no-progress", "iterations=3"]) == 0
    assert part_run.updates_path.read_text() == first_run.updates_path.read_text()
    assert part_run.metrics()[-1].fingerprint == first.fingerprint
    out = tmp_path / "exported"
    assert main(["export", str(first_run.path), "--out", str(out)]) == 0
    assert '"matches_servers": true' in (out / "seedcast_export.json").read_text()


def test_momentum_cannot_change_on_resume(tmp_path, tiny_model_dir):
    config = load_config(overrides=_overrides(tiny_model_dir, **{"es.momentum": 0.5}))
    run = RunDirectory.create(tmp_path / "run", config)
    with pytest.raises(ConfigError, match="es.momentum is fixed for a run"):
        run.load_config(["es.momentum=0.9"])
