"""pass@k against exact enumeration, and the bootstrap interval."""

from __future__ import annotations

import itertools

import pytest

from seedcast.studies.pass_at_k import bootstrap_interval, pass_at_k


def _enumerated(n: int, c: int, k: int) -> float:
    samples = [True] * c + [False] * (n - c)
    draws = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in draw) for draw in draws) / len(draws)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_matches_exact_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(_enumerated(n, c, k), abs=1e-12), (n, c, k)


def test_edges_and_large_n():
    assert pass_at_k(16, 0, 16) == 0.0 and pass_at_k(16, 1, 16) == 1.0
    assert pass_at_k(16, 4, 1) == pytest.approx(0.25)
    value = pass_at_k(1000, 3, 500)  # C(1000, 500) would overflow a float; the product does not
    assert 0.87 < value < 0.88
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_bootstrap_interval_brackets_the_mean():
    values = [0.0] * 30 + [1.0] * 10
    low, high = bootstrap_interval(values, seed=1)
    assert low < 0.25 < high and low > 0.05 and high < 0.45
    assert bootstrap_interval([0.5] * 10) == (0.5, 0.5)
