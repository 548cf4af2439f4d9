"""The arithmetic behind every claim: paired differences with bootstrap intervals, the verdict they add up
to, and the crossover k at which ES pulls ahead of GRPO. Kept apart from the claims themselves (studies/claims.py,
studies/claims_variants.py), which decide what to compare."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from seedcast.studies.pass_at_k import bootstrap_interval

if TYPE_CHECKING:
    from seedcast.studies.claims import Group

REPRODUCED, NOT_REPRODUCED, MIXED = "reproduced", "not reproduced", "mixed"


def difference(a: list[float], b: list[float], seed: int = 0) -> dict:
    """mean(b − a) over problems with a paired 95% bootstrap interval."""
    if len(a) != len(b):
        raise ValueError(f"the groups cover different problem counts ({len(a)} vs {len(b)})")
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    low, high = bootstrap_interval(diffs, seed=seed)
    return {"mean": statistics.fmean(diffs), "ci95": [low, high]}


def verdict(intervals: list[dict], claim_side: int = 1, tolerate_zero: bool = False) -> str:
    """Each interval supports the claim when it lies on `claim_side` of 0 (or reaches 0, if `tolerate_zero`);
    all support: reproduced; none supports nor leans its way: not reproduced; otherwise mixed."""

    def supports(d: dict) -> bool:
        low, high = sorted(x * claim_side for x in d["ci95"])
        return high >= 0 if tolerate_zero else low > 0

    def leans(d: dict) -> bool:
        return d["mean"] * claim_side > 0

    if intervals and all(supports(d) for d in intervals):
        return REPRODUCED
    if not any(supports(d) or leans(d) for d in intervals):
        return NOT_REPRODUCED
    return MIXED


def crossover(grpo: Group, es: Group, k_max: int) -> dict:
    """The smallest k <= k_max at which ES − GRPO pass@k is positive with its whole paired 95% interval above 0,
    scanning every k from 1 (`k`: None when there is none up to k_max), with the difference there."""
    for k in range(1, k_max + 1):
        measured = difference(grpo.pass_at(k), es.pass_at(k))
        if measured["ci95"][0] > 0:
            return {"k": k, "k_max": k_max, "difference": measured}
    return {"k": None, "k_max": k_max}
