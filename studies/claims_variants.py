"""Claims that judge one ES variant against full-rank, accuracy-optimising ES (`es:wall`) rather than against
GRPO: low-rank members at equal members, coverage fitness and low-temperature members at equal wall time. The
labels and the ES-vs-GRPO claims are studies/claims.py's."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from seedcast.studies.claim_math import difference, verdict

if TYPE_CHECKING:
    from seedcast.studies.claims import Group

RANKED_METHODS = ("lowrank",)  # written with their rank: lowrank1, lowrank4
FULL_RANK_REFERENCE = "es:wall"  # what low-rank runs at equal members are judged against
ACCURACY_REFERENCE = "es:wall"  # what the ES variants below are judged against, at the same wall time
# ES variants: METHOD -> (their claim, judged at the largest k or the first, what the variant is).
VARIANT_CLAIMS = {
    "coverage": ("coverage_fitness_raises_large_k", "largest", "coverage ES"),
    "lowtemp": ("low_temperature_members_raise_pass_at_1", "first", "ES scoring members at T = 0.3"),
}


def is_lowrank(group: Group) -> bool:
    """Whether a group is ES with low-rank members (its method is written with its rank: lowrank1, lowrank4)."""
    return group.method.rstrip("0123456789") in RANKED_METHODS


def on_the_variants_seeds(reference: Group, variant: Group) -> tuple[Group, str]:
    """The reference restricted to the seeds the variant ran, with the name to show for it. A variant made from
    fewer seeds than ES-best (`lowtemp:wall@0` beside `es:wall@0..2`) is the same seed's run with one setting
    changed, so it is judged against that seed's ES-best, not against a mean over seeds it never ran (which would
    credit it with seed 0 being ES-best's best). The whole reference when the variant has every seed the reference
    has, or seeds the reference lacks."""
    seeds = set(variant.seeds)
    kept = [i for i, seed in enumerate(reference.seeds) if seed in seeds]
    if None in seeds or len(kept) != len(seeds) or len(kept) == len(reference.labels):
        return reference, reference.name
    entropy = [reference.entropy[i] for i in kept] if len(reference.entropy) == len(reference.labels) else []
    restricted = replace(
        reference,
        labels=[reference.labels[i] for i in kept],
        correct=[reference.correct[i] for i in kept],
        entropy=entropy,
        relative_l2=[],
        wall_seconds=[],
        timed_on=[],
        completions=[],
        truncation_rate=[],
        finished_accuracy=[],
        stated_wrong_result=[],
    )
    return restricted, f"{reference.name}@{','.join(sorted(restricted.seeds))}"


def lowrank_claim(groups: dict[str, Group], k_max: int) -> dict | None:
    """Low-rank ES against full-rank ES at the same members (on the low-rank group's seeds), at pass@1 and at the
    largest k (None without both)."""
    full = groups.get(FULL_RANK_REFERENCE)
    lowrank = [g for g in groups.values() if is_lowrank(g) and g.budget == "members"]
    if not full or not lowrank:
        return None
    numbers, runs = {}, set()
    for group in lowrank:
        same, name = on_the_variants_seeds(full, group)
        runs.update(same.labels + group.labels)
        for k in sorted({1, k_max}):
            numbers[f"{group.name} − {name}, pass@{k}"] = difference(same.pass_at(k), group.pass_at(k))
    return {
        "claim": "lowrank_learns_as_well_as_full_rank",
        "difference": "low rank − full rank (on the same seeds), pass@k",
        "numbers": numbers,
        "verdict": verdict(list(numbers.values()), tolerate_zero=True),
        "runs": sorted(runs),
    }


def variant_claim(groups: dict[str, Group], method: str, k_max: int) -> dict | None:
    """An ES variant's groups (VARIANT_CLAIMS) against ES-best at the same wall time (`es:wall`, on the variant's
    seeds: on_the_variants_seeds): the variant's pass@k above ES-best's at the claim's k (the largest measured, or
    1), with the other end reported beside it, not judged. None without both, or when the claim is at the largest
    k and only k = 1 was measured."""
    claim, which, what = VARIANT_CLAIMS[method]
    reference = groups.get(ACCURACY_REFERENCE)
    variant = [g for g in groups.values() if g.method == method]
    if not reference or not variant or (which == "largest" and k_max == 1):
        return None
    k, other = (k_max, 1) if which == "largest" else (1, k_max)
    numbers, beside, runs = {}, {}, set()
    for g in variant:
        same, name = on_the_variants_seeds(reference, g)
        runs.update(same.labels + g.labels)
        numbers[f"{g.name} − {name}, pass@{k}"] = difference(same.pass_at(k), g.pass_at(k))
        if other != k:
            beside[g.name] = difference(same.pass_at(other), g.pass_at(other))
    return {
        "claim": claim,
        "k": k,
        "difference": f"{what} − ES-best (on the same seeds), pass@k",
        "numbers": numbers,
        "verdict": verdict(list(numbers.values())),
        **({f"at_pass_at_{other}": beside} if beside else {}),
        "runs": sorted(runs),
    }
