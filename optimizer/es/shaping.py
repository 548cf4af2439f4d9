"""Fitness shaping: small pure functions from raw rewards to the weights of an ES step.

Each maps a list of rewards (higher is better) to shaped fitness of the same length with mean ~0,
so the update moves toward members that scored above their population.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def z_score(rewards: np.ndarray) -> np.ndarray:
    """(r - mean) / std; all zeros when every member scored the same (no signal, no step)."""
    std = rewards.std()
    if std < 1e-12:
        return np.zeros_like(rewards)
    return (rewards - rewards.mean()) / std


def centered_ranks(rewards: np.ndarray) -> np.ndarray:
    """Ranks scaled to [-0.5, 0.5] (Salimans et al. 2017); ties share their mean rank."""
    n = len(rewards)
    if n < 2:
        return np.zeros_like(rewards)
    order = rewards.argsort(kind="stable")
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(n, dtype=np.float64)
    for value in np.unique(rewards):  # average ranks of ties so equal rewards get equal weight
        tied = rewards == value
        ranks[tied] = ranks[tied].mean()
    return ranks / (n - 1) - 0.5


SHAPINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "zscore": z_score,
    "centered_ranks": centered_ranks,
}
