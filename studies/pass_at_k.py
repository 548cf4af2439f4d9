"""pass@k with the unbiased estimator of Chen et al. (2021, arXiv:2107.03374; evaluators/pass_at_k.py, which
the servers use too), and bootstrap intervals.

From n samples of which c are correct, the probability that at least one of k samples drawn without
replacement is correct is 1 − C(n−c, k)/C(n, k), computed as a product so it never overflows:

    >>> pass_at_k(n=4, c=1, k=2)
    0.5
"""

from __future__ import annotations

import numpy as np

from seedcast.evaluators.pass_at_k import pass_at_k as pass_at_k  # re-exported: one estimator


def bootstrap_interval(
    values: list[float], resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, resampling problems with replacement."""
    data = np.asarray(values, dtype=np.float64)
    if len(data) == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))
