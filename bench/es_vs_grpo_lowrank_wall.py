"""The wall-time half of bench/es_vs_grpo.py's `lowrank` stage: low-rank ES at GRPO's wall time with the largest
population that batching its members makes affordable on this machine (the larger populations batching buys are
what low-rank members are for).

Affordable means an iteration of P low-rank members, generated WALL_GROUP at a time, costs no more seconds than
an iteration of ES-best's full-rank members one at a time, both measured on this machine: each candidate P, smallest
first and none after the first too slow, is paced
by a short run (`lowrank1:pace/pP`, PACE_ITERATIONS iterations; its summary's seconds per iteration) against the
probe's pace on this machine (es_vs_grpo_reference.py), which needs no GRPO run; GRPO's wall time on this machine is
needed only once a population is chosen. The largest P above es:wall's population within that pace is trained at
GRPO's wall time for seeds 0, 1, 2 (`lowrank1:wall@S`), its iterations from its own pace, and judged as an ES group
against GRPO and against es:wall. Where no population above es:wall's is affordable (a CPU, whose cores one
member's batch already fills, may find none), nothing more is trained and the paces, committed with the pace
runs, are the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from es_vs_grpo_reference import full_rank_reference, made_budget, wall_reference
from es_vs_grpo_tasks import SEEDS, lowrank_options
from es_vs_grpo_time import iterations_for_wall, seconds_per_iteration, summary

WALL_RANK = 1  # the rank that learned as well as full rank at equal members (docs/low-rank.md)
FULL_RANK_POPULATION = 16  # configs/es-best.yaml: es:wall's
WALL_POPULATIONS = (32, 64)  # the candidates above it
WALL_GROUP = 32  # members in one generate: 32 members x 32 prompts = 1,024 sequences
PACE_ITERATIONS = 2


def wall_options(population: int) -> tuple[str, ...]:
    """ES-best with `population` rank-WALL_RANK members, WALL_GROUP (or all) of them in one batched generation."""
    options = [o for o in lowrank_options(WALL_RANK) if not o.startswith("fleet.members_per_batch=")]
    return (*options, f"fleet.members_per_batch={min(population, WALL_GROUP)}", f"es.population={population}")


def affordable_population(full_rank_pace: float, paces: dict[int, float]) -> int | None:
    """The largest candidate population whose iteration costs no more than full rank's, or None."""
    within = [population for population, pace in paces.items() if pace <= full_rank_pace]
    return max(within, default=None)


def made_elsewhere(plan, name: str) -> dict[str, Path]:
    """The stage as another kind of machine left it, when that machine's pace is no longer recorded: its wall runs
    that are made (evaluated here as any run), none paced or trained again here."""
    runs = {f"{name}:wall@{seed}": plan.folder / f"{name}:wall@{seed}" for seed in SEEDS}
    made = {label: run for label, run in runs.items() if (run / "summary.json").is_file()}
    print(f"# {name}:wall: paced on another kind of machine whose pace is not recorded; kept as made there", flush=True)
    for label, run in made.items():
        plan.evaluate(label, run, rebuildable=True)
    return made


def lowrank_wall_stage(plan, make_es: Callable, grpo_runs: list[Path], probe: Path) -> dict[str, Path]:
    """Pace each candidate population, then train the largest affordable one at GRPO's wall time; returns label ->
    run folder for the comparisons (empty when none is affordable, in a dry run, or while the reference waits)."""
    name = f"lowrank{WALL_RANK}"
    full_rank = full_rank_reference(plan, make_es, probe, plan.folder / f"{name}:pace/p{WALL_POPULATIONS[0]}")
    if full_rank is None:
        return made_elsewhere(plan, name)
    full_rank_record = summary(full_rank)  # empty in a dry run that has still to make it
    full_rank_pace = seconds_per_iteration(full_rank_record) if full_rank_record else None
    pace_runs, paces = {}, {}
    for population in WALL_POPULATIONS:  # ascending: past the first too slow, a larger one is slower still
        pace_runs[population] = make_es(
            f"{name}:pace/p{population}", PACE_ITERATIONS, 0, wall_options(population), [full_rank]
        )
        record = summary(pace_runs[population])
        if not record and plan.dry_run:  # a pace still to make: the next candidate's is printed too
            continue
        paces[population] = seconds_per_iteration(record)
        if full_rank_pace is not None and paces[population] > full_rank_pace:
            break
    if plan.dry_run:
        return {}
    shown = ", ".join(f"{p} members {pace:.1f} s" for p, pace in paces.items())
    chosen = affordable_population(full_rank_pace, paces)
    print(
        f"# {name}:wall: seconds per iteration, full rank ({FULL_RANK_POPULATION} members one at a time) "
        f"{full_rank_pace:.1f} s; low rank batched: {shown}; population chosen: {chosen or 'none above 16'}",
        flush=True,
    )
    if chosen is None:
        return {}
    made = made_budget(plan.folder, [f"{name}:wall@{seed}" for seed in SEEDS])
    if made:
        iterations, timed = made
    else:
        timed, grpo_wall, reference_pace = wall_reference(plan, make_es, grpo_runs, probe)
        if not reference_pace:
            print(f"# {name}:wall: its wall budget waits on GRPO timed on this machine", flush=True)
            return {}
        iterations = iterations_for_wall(grpo_wall, summary(pace_runs[chosen]))
    runs = {}
    for seed in SEEDS:
        label = f"{name}:wall@{seed}"
        runs[label] = make_es(label, iterations, seed, wall_options(chosen), timed)
        plan.evaluate(label, runs[label], rebuildable=True)
    return runs
