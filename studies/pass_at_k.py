"""pass@k with the unbiased estimator of Chen et al. (2021, arXiv:2107.03374), and bootstrap intervals.

From n samples of which c are correct, the probability that at least one of k samples drawn without
replacement is correct is 1 − C(n−c, k)/C(n, k), computed as a product so it never overflows:

    >>> pass_at_k(n=4, c=1, k=2)
    0.5
"""

from __future__ import annotations

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n−c, k)/C(n, k) as the stable product; exact for k = n."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


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
