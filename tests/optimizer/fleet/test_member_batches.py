"""fleet.members_per_batch: fixed groups of low-rank members, each generated together by one server."""

from __future__ import annotations

from collections import deque

import pytest

from seedcast.cli import main
from seedcast.inference_server.validation import Limits
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.strategy import Member
from seedcast.optimizer.fleet.scheduler import _claim_group
from seedcast.optimizer.fleet.shards import units_of
from tests.inference_server.test_hostile_input import ThreadedServer


def _members(count: int) -> list[Member]:
    return [
        Member(index=i, seed=100 + i // 2, sign=1 - 2 * (i % 2), sampling_seed=i // 2, sigma=0.1) for i in range(count)
    ]


def test_groups_are_fixed_slices_of_the_population_even_after_a_failed_server_hands_one_back():
    queue = deque(units_of(_members(10), 1))
    first = _claim_group(queue, 4)
    second = _claim_group(queue, 4)
    assert [u.member.index for u in first] == [0, 1, 2, 3] and [u.member.index for u in second] == [4, 5, 6, 7]
    queue.extendleft(reversed(first))  # the server that held the first group failed: it goes back whole
    assert [u.member.index for u in _claim_group(queue, 4)] == [0, 1, 2, 3]
    assert [u.member.index for u in _claim_group(queue, 4)] == [8, 9]  # the last group is what is left
    assert _claim_group(queue, 4) == []


def test_member_batches_need_low_rank_members_whole_prompt_batches_and_nearest_rounding():
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["fleet.members_per_batch=4", "fleet.prompt_shards=2", "es.rounding=stochastic"])
    message = str(raised.value)
    for fragment in ("es.perturbation=lowrank", "fleet.prompt_shards=1", "es.rounding=nearest"):
        assert fragment in message
    assert load_config(overrides=["fleet.members_per_batch=4", "es.perturbation=lowrank"]).fleet.members_per_batch == 4


def test_a_server_that_generates_members_one_at_a_time_is_refused_before_step_one(tmp_path, capsys):
    server = ThreadedServer(Limits(allowed_evaluators=None))  # the simulated backend does not batch members
    try:
        overrides = [
            "model.name=simulated",
            "es.noise=gaussian",
            "es.perturbation=lowrank",
            "fleet.members_per_batch=2",
            "fleet.local=0",
            f"fleet.servers=[{server.address}]",
            "iterations=1",
        ]
        assert main(["train", "--run-dir", str(tmp_path / "run"), "--no-progress", *overrides]) == 2
    finally:
        server.stop()
    error = capsys.readouterr().err
    assert f"server {server.address}" in error and "generates members one at a time" in error
    assert "fleet.members_per_batch=1" in error and not (tmp_path / "run" / "updates.jsonl").read_text()
