"""The start-up advice on `fleet.prompt_shards`: how much of a fleet's time an iteration's last round of equal
units can keep generating, and the smallest shard count that lifts it to the target."""

from __future__ import annotations

import pytest

from seedcast.optimizer.fleet.shards import ADVISED_BOUND, TAIL_TARGET, advised_shards, tail_advice, tail_bound


@pytest.mark.parametrize(
    ("units", "servers", "bound"),
    [(16, 7, 16 / 21), (128, 7, 128 / 133), (16, 8, 1.0), (30, 8, 30 / 32), (5, 1, 1.0)],
)
def test_the_bound_is_units_over_the_rounds_servers_could_fill(units, servers, bound):
    assert tail_bound(units, servers) == pytest.approx(bound)


def test_an_uneven_fleet_is_told_the_smallest_shard_count_that_reaches_the_target():
    advice = tail_advice(population=16, shards=1, servers=7, batch_size=32)
    assert advice is not None
    assert "at most 76%" in advice and "fleet.prompt_shards=3 would allow 98%" in advice  # 48 units in 7 rounds
    assert tail_bound(16 * 2, 7) < TAIL_TARGET and tail_bound(16 * 3, 7) >= ADVISED_BOUND
    assert advised_shards(16, 1, 7, 32) == 3 and advised_shards(16, 2, 7, 32) == 3
    # 2 shards would allow 0.952, above the target but with no room for each unit's own cost: 3 allow 0.989
    assert advised_shards(30, 1, 7, 32) == 3 and advised_shards(16, 1, 5, 32) == 4
    assert "fleet.prompt_shards=4 would allow 100%" in tail_advice(30, 1, 8, 32)


@pytest.mark.parametrize(
    ("population", "shards", "servers", "batch_size"),
    [
        (16, 1, 1, 32),  # one server never idles in the tail
        (16, 1, 8, 32),  # two whole rounds
        (16, 8, 7, 32),  # already sharded enough: 128 units allow 96%
        (16, 1, 7, 2),  # two shards allow 91% and no more fit in a batch of 2
        (30, 1, 7, 2),  # two shards allow 95.2%, short of the advised bound
    ],
)
def test_no_advice_when_the_shape_is_fine_or_no_shard_count_helps(population, shards, servers, batch_size):
    assert tail_advice(population, shards, servers, batch_size) is None
    assert advised_shards(population, shards, servers, batch_size) is None
