"""pass@k with the unbiased estimator of Chen et al. (2021, arXiv:2107.03374): from n samples of which c are
correct, the probability that at least one of k samples drawn without replacement is correct,
1 − C(n−c, k)/C(n, k), computed as a product so it never overflows. Servers use it for a prompt's reward under
es.fitness=pass_at_k, and `seedcast eval` / `seedcast compare` for their curves: one estimator for both.

    >>> pass_at_k(n=4, c=1, k=2)
    0.5
"""

from __future__ import annotations

import math

PASSING_REWARD = 1.0  # a sample passes when its reward is this (binary rewards: right or wrong)


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n−c, k)/C(n, k) as the stable product; exact for k = n."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / m for m in range(n - c + 1, n + 1))


def prompt_pass_at_k(rewards: list[float | None], k: int) -> float:
    """The pass@k estimate from one prompt's sample rewards (None or NaN: not scorable, left out); NaN when fewer
    than k samples are scorable."""
    scored = [reward for reward in rewards if reward is not None and not math.isnan(reward)]
    if len(scored) < k:
        return math.nan
    return pass_at_k(len(scored), sum(reward >= PASSING_REWARD for reward in scored), k)
