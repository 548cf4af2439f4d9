"""What bench/es_vs_grpo.py makes while GRPO's next run would not end by --stop-by: the runs and evaluations that
wait on no run still to come, so a session's last hour is not idle."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from es_vs_grpo_tasks import BASE_MODEL, SEEDS, probe_iterations
from es_vs_grpo_time import PROBE, OutOfTime


def use_waiting_time(plan, make_es: Callable, stages: tuple[str, ...], grpo_runs: list[Path]) -> None:
    """When GRPO's next run would not end by --stop-by, make what waits on no run still to come, each if it
    fits: the probe (timed on this machine, like the finished GRPO runs), the base model's evaluations, the
    probe's, then those of the ES runs an earlier session finished (es:wall, the format control: their update logs
    rebuild them). A later invocation finds them done (compare's cache keeps the evaluations)."""
    if "probe" not in stages or plan.dry_run or not grpo_runs:
        return
    try:
        probe = make_es(PROBE, probe_iterations(plan.task), 0, timed_against=grpo_runs)
    except OutOfTime as stopped:
        print(f"# meanwhile: {stopped}", flush=True)
        return
    if "compare" in stages:
        plan.evaluate("base", BASE_MODEL, rebuildable=True)
    plan.evaluate(PROBE, probe, rebuildable=True)
    finished_earlier = [f"es:wall@{seed}" for seed in SEEDS] if "es" in stages else []
    finished_earlier += ["format:wall@0"] if "format" in stages else []
    for label in finished_earlier:
        if (plan.folder / label / "summary.json").is_file():
            plan.evaluate(label, plan.folder / label, rebuildable=True)


def unless_out_of_time(action: Callable, *args) -> OutOfTime | None:
    """Do `action(*args)`; if it would not end by --stop-by (a GRPO run trained again starts only with time for its
    training and the first part of its evaluation, or all of it: es_vs_grpo_retrain.evaluation_to_fit), say so and
    return why instead, so the stages that do not wait on it use the time. The caller raises it before anything
    that does wait on it."""
    try:
        action(*args)
    except OutOfTime as stopped:
        print(f"# {stopped}; meanwhile the runs that do not wait on it", flush=True)
        return stopped
    return None
