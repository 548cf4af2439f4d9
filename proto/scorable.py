"""The one definition of "mean of the scorable rewards", shared by servers and optimizer.

An evaluator answers None for a completion it cannot score; on the wire and in the optimizer an
unscorable reward is NaN. A member's, a shard's and an evaluation's mean leave both out, and are NaN
when nothing was scorable (so the member counts as failed rather than as scoring 0).

    >>> mean_of_scorable([1.0, None, float("nan"), 0.0])
    0.5
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def scorable(rewards: Iterable[float | None]) -> list[float]:
    """The rewards that were scored (neither None nor NaN), in order."""
    return [r for r in rewards if r is not None and not math.isnan(r)]


def mean_of_scorable(rewards: Iterable[float | None]) -> float:
    """sum / count of the scorable rewards (in that order, so every caller gets the same bits); NaN if none."""
    scored = scorable(rewards)
    return sum(scored) / len(scored) if scored else math.nan
