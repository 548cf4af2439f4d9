"""Per-prompt fitness (es.fitness=per_prompt) and the one byte per prompt it travels in."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seedcast.optimizer.es.fitness import mean_fitness, member_fitness, per_prompt_fitness
from seedcast.optimizer.es.shaping import z_score
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.reward_bytes import decode_rewards, encode_rewards


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
