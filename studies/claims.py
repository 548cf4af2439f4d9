"""The ES papers' claims, checked on one task's `seedcast compare` entries: claims.json, never by hand.

Entries are named `METHOD[:BUDGET][@SEED]`, e.g. `base`, `grpo@0`, `es:wall@1`, `es:completions@0`,
`hybrid@0`, `lowrank1:members@0`, `coverage:wall@0`, with METHOD one of base, es, grpo, hybrid, format, coverage
(ES whose fitness is pass@k, `es.fitness=pass_at_k`), lowtemp (ES-best scoring members at a low temperature; both
are ES groups in every ES claim) or lowrankR (ES with rank-R members, `es.perturbation=lowrank es.rank=R`) and
BUDGET `completions` (the same number of generated completions as GRPO), `wall` (the same wall time) or `members`
(the same population and iterations as the full-rank `es:wall` runs). Several seeds of one METHOD:BUDGET form a
group: a problem's pass@k is the mean over its seeds, and differences between groups are paired over problems
with a percentile bootstrap (95%).

The claims (Qiu et al. 2025; Ba et al. 2026):

- `es_matches_grpo_at_pass_at_1`: ES's pass@1 is not below GRPO's (the interval of ES − GRPO reaches 0
  or lies above it);
- `es_beats_grpo_at_large_k`: ES's pass@k at the largest k is above GRPO's (not judged when only k = 1 was
  measured, e.g. a greedy comparison: pass@1 is the first claim's); it also names the crossover per ES group,
  the smallest k at which ES − GRPO is positive with its interval above 0, or that there is none up to the
  largest k (every k is scanned);
- `es_keeps_entropy_grpo_collapses`: GRPO lowers the token entropy against the base, and ES lowers it less;
- `hybrid_is_best`: ES→GRPO beats both ES and GRPO at pass@1 and at the largest k;
- `es_moves_weights_further`: ES's relative L2 change from the base is at least 10× GRPO's (the papers
  report about 40×);
- `lowrank_learns_as_well_as_full_rank` (Sarkar et al. 2025): low-rank ES's pass@1 and pass@k at the largest
  k are not below full-rank ES's (`es:wall`) at the same members, `lowrankR:members` (each interval of low-rank
  − full rank reaches 0 or lies above it); low-rank ES at GRPO's wall time with a larger population,
  `lowrankR:wall`, is an ES group in the claims above instead;
- `coverage_fitness_raises_large_k`: ES that optimises pass@k (`coverage:wall`) has a higher pass@k at the
  largest k than ES that optimises accuracy at the same wall time (`es:wall`; the interval of coverage − accuracy
  lies above 0). Not judged when only k = 1 was measured;
- `low_temperature_members_raise_pass_at_1` (Countdown's open question): ES-best scoring its members at T = 0.3
  (`lowtemp:wall`, at es:wall's iterations) has a higher sampled pass@1 than ES-best (`es:wall`).

These last three judge a variant of ES-best against ES-best on the variant's own seeds: a variant run on seed 0
only is set beside `es:wall@0`, not beside the mean of es:wall's three seeds (studies/claims_variants.py).

Each gets `reproduced`, `not reproduced` or `mixed` (the budgets or k disagree, or the point estimate is
on the claim's side with an interval that reaches 0), with the numbers behind it.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from seedcast.optimizer.atomic_file import write_atomically
from seedcast.optimizer.machine import describe
from seedcast.studies.claim_math import MIXED, NOT_REPRODUCED, REPRODUCED, crossover, difference, verdict
from seedcast.studies.claims_variants import (
    RANKED_METHODS,
    VARIANT_CLAIMS,
    is_lowrank,
    lowrank_claim,
    on_the_variants_seeds,
    variant_claim,
)
from seedcast.studies.pass_at_k import bootstrap_interval, pass_at_k

METHODS = ("base", "es", "grpo", "hybrid", "format", "lowrank", "coverage", "lowtemp")
ES_METHODS = ("es", "coverage", "lowtemp")  # the groups the ES-vs-GRPO claims judge
BUDGETS = ("completions", "wall", "members")
_LABEL = re.compile(r"^(?P<method>[a-z]+)(?P<rank>[0-9]+)?(?::(?P<budget>[a-z]+))?(?:@(?P<seed>\w+))?$")
L2_RATIO_REPRODUCED = 10.0


@dataclass
class Group:
    """The seeds of one method at one budget, as compare measured them."""

    method: str
    budget: str | None
    labels: list[str] = field(default_factory=list)
    correct: list[list[list[bool]]] = field(default_factory=list)  # per seed, per problem, per sample
    entropy: list[list[float]] = field(default_factory=list)  # per seed, per problem
    relative_l2: list[float] = field(default_factory=list)
    wall_seconds: list[float] = field(default_factory=list)
    timed_on: list[str] = field(default_factory=list)  # per seed, the kind of machine its wall time is from
    completions: list[int] = field(default_factory=list)
    truncation_rate: list[float] = field(default_factory=list)  # per seed, over all samples
    finished_accuracy: list[float] = field(default_factory=list)  # per seed, among samples not cut off
    stated_wrong_result: list[float] = field(default_factory=list)  # per seed (Countdown: studies/reward_hacking.py)

    @property
    def name(self) -> str:
        return self.method + (f":{self.budget}" if self.budget else "")

    @property
    def seeds(self) -> list[str | None]:
        """Per entry, the seed its label names (None for a label without one)."""
        return [parse_label(label)[2] for label in self.labels]

    def pass_at(self, k: int) -> list[float]:
        """Per problem, pass@k averaged over the seeds."""
        per_seed = [[pass_at_k(len(s), sum(s), k) for s in seed] for seed in self.correct]
        return [statistics.fmean(values) for values in zip(*per_seed, strict=True)]

    def mean_entropy(self) -> list[float] | None:
        """Per problem, mean token entropy averaged over the seeds (None without entropy)."""
        if len(self.entropy) != len(self.correct) or not self.entropy:
            return None
        return [statistics.fmean(values) for values in zip(*self.entropy, strict=True)]


def parse_label(label: str) -> tuple[str, str | None, str | None]:
    """`es:wall@1` -> ("es", "wall", "1"), `lowrank4:members@0` -> ("lowrank4", "members", "0"); a ValueError
    names the grammar."""
    match = _LABEL.match(label)
    ranked = match is not None and match["method"] in RANKED_METHODS
    if (
        not match
        or match["method"] not in METHODS
        or (match["budget"] and match["budget"] not in BUDGETS)
        or ranked != (match["rank"] is not None)
        or (ranked and int(match["rank"]) < 1)
    ):
        raise ValueError(
            f"entry label {label!r} is not METHOD[:BUDGET][@SEED] with METHOD in {', '.join(METHODS)} (lowrank with "
            f"its rank, e.g. lowrank1) and BUDGET in {', '.join(BUDGETS)}"
        )
    return match["method"] + (match["rank"] or ""), match["budget"], match["seed"]


def group_entries(entries: Sequence) -> dict[str, Group]:
    """compare's entries (with results and per-problem correctness) by METHOD[:BUDGET]."""
    groups: dict[str, Group] = {}
    for entry in entries:
        method, budget, _ = parse_label(entry.label)
        if entry.per_problem_correct is None:
            raise ValueError(f"{entry.label}: its evaluation has no samples.jsonl; evaluate it again")
        group = groups.setdefault(method + (f":{budget}" if budget else ""), Group(method, budget))
        group.labels.append(entry.label)
        group.correct.append(entry.per_problem_correct)
        if entry.per_problem_entropy is not None:
            group.entropy.append(entry.per_problem_entropy)
        if entry.geometry:
            group.relative_l2.append(entry.geometry["relative_l2"])
        results = entry.results or {}
        if results.get("truncation_rate") is not None:
            group.truncation_rate.append(results["truncation_rate"])
        if results.get("finished_accuracy") is not None:
            group.finished_accuracy.append(results["finished_accuracy"])
        if results.get("stated_wrong_result_rate") is not None:
            group.stated_wrong_result.append(results["stated_wrong_result_rate"])
        if entry.training:
            group.wall_seconds.append(entry.training["wall_seconds"])
            group.timed_on.append(describe(entry.training.get("machine")))
            group.completions.append(entry.training.get("completions") or 0)
    return groups


def _es_groups(groups: dict[str, Group]) -> list[Group]:
    """The groups the ES-vs-GRPO claims judge: ES of every fitness, and low-rank ES at GRPO's wall time."""
    return [g for g in groups.values() if g.method in ES_METHODS or (is_lowrank(g) and g.budget == "wall")]


def evaluate_claims(groups: dict[str, Group], k_max: int) -> list[dict]:
    """The claims that the groups present can test, each with its verdict and numbers."""
    claims = []
    grpo, base, hybrid = groups.get("grpo"), groups.get("base"), groups.get("hybrid")
    es_groups = _es_groups(groups)
    if grpo and es_groups:
        pass_at_k_claims = [(1, "es_matches_grpo_at_pass_at_1", True)]
        if k_max > 1:
            pass_at_k_claims.append((k_max, "es_beats_grpo_at_large_k", False))
        for k, claim, tolerate in pass_at_k_claims:
            numbers = {es.name: difference(grpo.pass_at(k), es.pass_at(k)) for es in es_groups}
            claims.append(
                {
                    "claim": claim,
                    "k": k,
                    "difference": "ES − GRPO, pass@k",
                    "numbers": numbers,
                    "verdict": verdict(list(numbers.values()), tolerate_zero=tolerate),
                    "runs": sorted(grpo.labels + [label for es in es_groups for label in es.labels]),
                }
            )
        if k_max > 1:  # the large-k claim also says where, if anywhere, ES pulls ahead
            claims[-1]["crossover"] = {es.name: crossover(grpo, es, k_max) for es in es_groups}
    if grpo and es_groups and base and base.mean_entropy() and grpo.mean_entropy():
        grpo_drop = difference(base.mean_entropy(), grpo.mean_entropy())
        es_vs_grpo = {
            es.name: difference(grpo.mean_entropy(), es.mean_entropy()) for es in es_groups if es.mean_entropy()
        }
        verdicts = [verdict([grpo_drop], claim_side=-1), *(verdict([d]) for d in es_vs_grpo.values())]
        entropy_verdict = verdicts[0] if len(set(verdicts)) == 1 else MIXED
        claims.append(
            {
                "claim": "es_keeps_entropy_grpo_collapses",
                "difference": "mean token entropy (nats)",
                "numbers": {
                    "grpo − base": grpo_drop,
                    **{f"{n} − grpo": d for n, d in es_vs_grpo.items()},
                    **{
                        f"{es.name} − base": difference(base.mean_entropy(), es.mean_entropy())
                        for es in es_groups
                        if es.mean_entropy()
                    },
                },
                "verdict": entropy_verdict,
                "runs": sorted(base.labels + grpo.labels),
            }
        )
    if hybrid and grpo and es_groups:
        numbers = {
            f"hybrid − {other.name}, pass@{k}": difference(other.pass_at(k), hybrid.pass_at(k))
            for other in (grpo, *es_groups)
            for k in sorted({1, k_max})
        }
        claims.append(
            {
                "claim": "hybrid_is_best",
                "difference": "hybrid − other, pass@k",
                "numbers": numbers,
                "verdict": verdict(list(numbers.values())),
                "runs": sorted(hybrid.labels + grpo.labels),
            }
        )
    variants = [variant_claim(groups, method, k_max) for method in VARIANT_CLAIMS]
    claims.extend(claim for claim in (lowrank_claim(groups, k_max), *variants) if claim)
    if grpo and grpo.relative_l2 and any(es.relative_l2 for es in es_groups):
        ratios = {
            es.name: statistics.fmean(es.relative_l2) / statistics.fmean(grpo.relative_l2)
            for es in es_groups
            if es.relative_l2
        }
        supported = [r >= L2_RATIO_REPRODUCED for r in ratios.values()]
        l2_verdict = REPRODUCED if all(supported) else NOT_REPRODUCED if all(r < 1 for r in ratios.values()) else MIXED
        claims.append(
            {
                "claim": "es_moves_weights_further",
                "difference": "relative L2 change, ES ÷ GRPO",
                "numbers": ratios,
                "threshold": L2_RATIO_REPRODUCED,
                "verdict": l2_verdict,
                "runs": sorted(grpo.labels + [label for es in es_groups for label in es.labels]),
            }
        )
    return claims


def task_rows(groups: dict[str, Group], ks: list[int]) -> list[dict]:
    """One row per group: pass@k with intervals over problems, seeds, wall time and completions."""
    rows = []
    for group in groups.values():
        pass_rows = {}
        for k in ks:
            values = group.pass_at(k)
            low, high = bootstrap_interval(values)
            pass_rows[str(k)] = {"mean": statistics.fmean(values), "ci95": [low, high]}
        rows.append(
            {
                "method": group.method,
                "budget": group.budget,
                "seeds": len(group.labels),
                "runs": group.labels,
                "pass_at_k": pass_rows,
                "wall_seconds": _mean_or_none(group.wall_seconds),
                "timed_on": sorted(set(group.timed_on)),
                "completions": _mean_or_none(group.completions),
                "truncation_rate": _mean_or_none(group.truncation_rate),
                "finished_accuracy": _mean_or_none(group.finished_accuracy),
                **(
                    {"stated_wrong_result_rate": _mean_or_none(group.stated_wrong_result)}
                    if group.stated_wrong_result
                    else {}
                ),
            }
        )
    return rows


def _mean_or_none(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def format_control(groups: dict[str, Group], ks: list[int]) -> dict | None:
    """How much of a gain is format: each ES group against the run trained on a format-only reward
    (`format:*`), and that run against the base, paired over problems at pass@1 and the largest k. An ES
    gain that the format run matches is format; what ES has above it is skill. An ES group with seeds the control
    lacks is also set against the control on the control's own seeds (`es:wall@0 − format:wall`): the same seed's
    run with only the reward changed, free of the spread between seeds."""
    controls = [g for g in groups.values() if g.method == "format"]
    if not controls:
        return None
    numbers = {}
    for control in controls:
        for k in sorted({1, max(ks)}):
            if "base" in groups:
                numbers[f"{control.name} − base, pass@{k}"] = difference(groups["base"].pass_at(k), control.pass_at(k))
            for es in _es_groups(groups):
                numbers[f"{es.name} − {control.name}, pass@{k}"] = difference(control.pass_at(k), es.pass_at(k))
                same, name = on_the_variants_seeds(es, control)
                if same is not es:
                    numbers[f"{name} − {control.name}, pass@{k}"] = difference(control.pass_at(k), same.pass_at(k))
    return {
        "difference": "paired over problems, 95% bootstrap",
        "numbers": numbers,
        "runs": sorted(label for control in controls for label in control.labels),
    }


def write_claims(path: Path, task: str, entries: Sequence, ks: list[int], command: str) -> dict:
    """Add (or replace) `task` in the claims file at `path`; returns that task's part."""
    groups = group_entries(entries)
    part = {
        "command": command,
        "problems": len(next(iter(groups.values())).correct[0]),
        "rows": task_rows(groups, ks),
        "claims": evaluate_claims(groups, max(ks)),
    }
    control = format_control(groups, ks)
    if control:
        part["format_control"] = control
    document = json.loads(path.read_text()) if path.is_file() else {"tasks": {}}
    document["tasks"][task] = part
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(document, indent=2) + "\n")
    return part
