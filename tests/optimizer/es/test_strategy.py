"""The ES strategy: deterministic asks, the reward-maximising sign, c_i = α·F_i/(N·σ), shaping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seedcast.optimizer.es.seeds import derive_seed
from seedcast.optimizer.es.shaping import centered_ranks, z_score
from seedcast.optimizer.es.strategy import ESState, OpenES


def test_ask_is_a_pure_function_of_seed_and_iteration():
    strategy = OpenES(population=6, sigma=0.01, learning_rate=0.1, run_seed=5)
    assert strategy.ask(ESState(3)) == strategy.ask(ESState(3))
    assert strategy.ask(ESState(3)) != strategy.ask(ESState(4))
    assert OpenES(population=6, sigma=0.01, learning_rate=0.1, run_seed=6).ask(ESState(3)) != strategy.ask(ESState(3))


def test_run_seeds_keep_their_values():
    # Pinned: every update log ever written names its members by these seeds.
    assert derive_seed(0, "member", 0, 0) == 0x3074C22A8E7CC0F3
    assert derive_seed(7, "batch", 3) == 0x7E52786EBBFDEDB2


def test_members_carry_the_strategys_sigma():
    strategy = OpenES(population=4, sigma=0.03, learning_rate=0.1)
    members = strategy.ask(ESState(0))
    update, _ = strategy.tell(ESState(0), members, {m.index: float(m.index) for m in members})
    assert {m.sigma for m in members} == {update.sigma} == {0.03}


def test_mirrored_pairs_share_seed_and_sampling_seed():
    members = OpenES(population=4, sigma=0.01, learning_rate=0.1).ask(ESState(0))
    assert [m.sign for m in members] == [1, -1, 1, -1]
    assert members[0].seed == members[1].seed != members[2].seed == members[3].seed
    assert members[0].sampling_seed == members[1].sampling_seed


def test_reward_is_maximised():
    strategy = OpenES(population=4, sigma=0.01, learning_rate=0.1, mirrored=False)
    members = strategy.ask(ESState(0))
    update, state = strategy.tell(ESState(0), members, {0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0})
    coefficients = dict(update.terms)
    assert coefficients[members[0].seed] > 0  # toward the member that scored best
    assert all(coefficients[m.seed] < 0 for m in members[1:])
    assert state == ESState(1) and update.step == 1


def test_coefficients_follow_the_formula():
    strategy = OpenES(population=4, sigma=0.02, learning_rate=0.5, mirrored=False)
    members = strategy.ask(ESState(0))
    rewards = [0.1, 0.4, 0.2, 0.9]
    update, _ = strategy.tell(ESState(0), members, dict(enumerate(rewards)))
    shaped = z_score(np.array(rewards))
    expected = {m.seed: 0.5 * f / (4 * 0.02) for m, f in zip(members, shaped) if f != 0}
    assert shaped[1] == 0 and len(expected) == 3  # a member exactly at the mean contributes no term
    assert dict(update.terms) == pytest.approx(expected)


def test_mirrored_pair_merges_into_one_term():
    strategy = OpenES(population=2, sigma=0.1, learning_rate=1.0)
    members = strategy.ask(ESState(0))
    update, _ = strategy.tell(ESState(0), members, {0: 1.0, 1: 0.0})
    assert len(update.terms) == 1
    # F = (+1, -1): c = 1/(2·0.1)·(+1·1 − 1·(−1)) = 10
    assert update.terms[0] == (members[0].seed, pytest.approx(10.0))


def test_failed_members_are_left_out():
    strategy = OpenES(population=4, sigma=0.1, learning_rate=1.0, mirrored=False)
    members = strategy.ask(ESState(0))
    update, _ = strategy.tell(ESState(0), members, {0: 1.0, 1: math.nan, 3: 0.0})
    assert {seed for seed, _ in update.terms} == {members[0].seed, members[3].seed}


def test_equal_rewards_make_an_empty_step():
    strategy = OpenES(population=4, sigma=0.1, learning_rate=1.0)
    update, state = strategy.tell(ESState(2), strategy.ask(ESState(2)), {i: 0.5 for i in range(4)})
    assert update.terms == [] and update.step == 3 and state.iteration == 3


def test_shapings():
    ranks = centered_ranks(np.array([10.0, 30.0, 20.0]))
    assert ranks.tolist() == [-0.5, 0.5, 0.0]
    assert centered_ranks(np.array([1.0, 1.0, 2.0])).tolist() == [-0.25, -0.25, 0.5]
    z = z_score(np.array([1.0, 2.0, 3.0]))
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)


def test_invalid_strategy_arguments():
    with pytest.raises(ValueError, match="even"):
        OpenES(population=3, sigma=0.1, learning_rate=0.1, mirrored=True)
    with pytest.raises(ValueError, match="sigma"):
        OpenES(population=4, sigma=0.0, learning_rate=0.1)
