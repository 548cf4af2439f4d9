"""How long `bench/es_vs_grpo.py`'s runs take, and where their wall time counts: the estimates behind
`--stop-by`, ES's iterations at GRPO's wall time, and the guard that keeps wall-matched runs on one kind of
machine (a wall-time budget timed on one kind means nothing on another)."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from seedcast.optimizer.machine import describe, machine_kind

PROBE = "es:completions@0"  # the ES run that measures ES's seconds per iteration

# Before the task's own runs say better, for --stop-by: a GRPO step, an ES-best iteration, an ES run's start and
# in-training evals, a run's held-out evaluations. Measured on Countdown on a 2-core avx512_bf16 CPU (level 1)
# and, for the GRPO step, on a 2-core AVX2-only one (level 8: 808 s); the rest there is scaled by 3.5, as a
# member's time (3.0 s against 11.8 s, docs/performance.md).
GRPO_STEP_SECONDS, ES_ITERATION_SECONDS, START_SECONDS, EVALUATION_SECONDS = 280.0, 50.0, 120.0, 900.0
SLOWER_BY_ISA = {"avx512f": 3.5, "avx2": 3.5, "baseline": 3.5}  # fp32 inference: no native bf16


def default_seconds(seconds: float) -> float:
    """A default estimate (measured on an avx512_bf16 CPU) scaled to this machine's kind."""
    return seconds * SLOWER_BY_ISA.get(str(machine_kind()["isa"]), 1.0)


def summary(run_dir: Path) -> dict:
    """A run's summary.json (empty before it has finished)."""
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


class OutOfTime(Exception):
    """The next run would not end before --stop-by (a run cut by the end of a session starts again)."""


def grpo_seconds(folder: Path, steps: int) -> float:
    """How long a GRPO run of `steps` steps and its evaluations take, from the task's finished GRPO runs."""
    done = [summary(path.parent) for path in folder.glob("**/summary.json")]
    done = [s for s in done if s.get("method") == "grpo" and s.get("steps")]
    if done:
        per_step = sum(s["wall_seconds"] for s in done) / sum(s["steps"] for s in done)
    else:
        per_step = default_seconds(GRPO_STEP_SECONDS)
    return per_step * steps + default_seconds(EVALUATION_SECONDS)


def es_seconds(folder: Path, iterations: int) -> float:
    """How long an ES run of `iterations` and its evaluations take, from the probe run once it exists."""
    probe = summary(folder / PROBE)
    if not probe.get("steps"):
        return default_seconds(START_SECONDS + ES_ITERATION_SECONDS * iterations + EVALUATION_SECONDS)
    fixed = probe.get("wall_seconds_this_session", probe["wall_seconds"]) - probe["wall_seconds"]
    return fixed + probe["wall_seconds"] / probe["steps"] * iterations + default_seconds(EVALUATION_SECONDS)


def stop_time(text: str) -> float:
    """`HH:MM` today (local time) as a timestamp, for --stop-by."""
    try:
        hours, minutes = (int(part) for part in text.split(":"))
        moment = datetime.now().replace(hour=hours, minute=minutes, second=0, microsecond=0)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--stop-by takes HH:MM (local time today), got {text!r}") from error
    if moment <= datetime.now():
        raise argparse.ArgumentTypeError(f"--stop-by {text} has passed")
    return moment.timestamp()


def require_same_machine(name: str, timed_against) -> None:
    """Stop before a wall-matched run on another kind of machine than the runs whose wall time it matches."""
    here = machine_kind()
    for run_dir in timed_against:
        there = summary(run_dir).get("machine")
        if there != here:
            raise SystemExit(
                f"{name} matches the wall time of {run_dir}, timed on {describe(there)}; this machine is "
                f"{describe(here)}. Make it on that kind of machine, or make the task's runs again here "
                "(a new --out)."
            )


def iterations_for_wall(seconds: float, probe: dict) -> int:
    """ES iterations whose whole run (servers starting, evals, iterations) lasts `seconds`, as GRPO's
    wall time counts its whole run. From the probe run: `wall_seconds` sums its iterations, and the rest of
    its elapsed time (`wall_seconds_this_session`) is the fixed cost of starting and evaluating."""
    iterating = probe.get("wall_seconds", 1.0)
    fixed = max(0.0, probe.get("wall_seconds_this_session", iterating) - iterating)
    return max(1, round((seconds - fixed) / (iterating / max(1, probe.get("steps", 1)))))
