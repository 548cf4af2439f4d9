"""How long `bench/es_vs_grpo.py`'s runs take, and where their wall time counts: the estimates behind
`--stop-by`, ES's iterations at GRPO's wall time, and the guard that keeps wall-matched runs on one kind of
machine (a wall-time budget timed on one kind means nothing on another)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from es_vs_grpo_tasks import TASKS, comparisons

from seedcast.clock_time import next_clock_time
from seedcast.optimizer.machine import describe, machine_kind

PROBE = "es:completions@0"  # the ES run that measures ES's seconds per iteration
RETIMED_PROBE = PROBE + "~retimed"  # the probe made again on this kind of machine (es_vs_grpo_reference.py)


class Estimates(NamedTuple):
    """Seconds, before the task's own runs say better (--stop-by): a GRPO step, an ES-best iteration, an ES run's
    start and in-training evals, and one run's held-out evaluations (every comparison it belongs to)."""

    grpo_step: float
    es_iteration: float
    es_start: float
    evaluation: float


# On Countdown on 2-core CPUs. avx512_bf16 (level 1) and AVX2 only, fp32 inference (level 8): all measured (a GRPO step
# 808-894 s, an ES-best iteration 320-326 s and 142 s of start-up and evals on the AVX2 probe). Other kinds take the
# slower row. Evaluations measured before entropy was recorded while generating took about twice as long
# (avx512_bf16's 900 s, kept: an overestimate is safe).
EVALUATION_AVX2 = 2450.0  # level 8, a GRPO run's three comparisons: 22 + 13 + 4 (greedy) min of sampling
NATIVE_BF16 = Estimates(280.0, 50.0, 120.0, 900.0)
ESTIMATES = {
    "amx_bf16": NATIVE_BF16,
    "avx512_bf16": NATIVE_BF16,
    "avx2": Estimates(850.0, 325.0, 150.0, EVALUATION_AVX2),
}


def estimates() -> Estimates:
    """The default estimates for this machine's kind."""
    return ESTIMATES.get(str(machine_kind()["isa"]), ESTIMATES["avx2"])


def evaluation_seconds() -> float:
    """How long one run's held-out evaluations take on this machine."""
    return estimates().evaluation


# The comparisons the machine's `evaluation` estimate was measured on, all sampled by hf servers.
CALIBRATED = ("compare", "compare-64-tokens", "compare-greedy")
BACKEND_SPEED = {"hf": 1.0, "vllm": 2.5}  # sampling speed relative to hf on these CPUs (docs/vllm.md)


def evaluation_estimate(task: str, label: str, only: tuple[str, ...] = (), folder: Path | None = None) -> float:
    """How long evaluating `label` takes: for each of its comparisons (those named in `only`, if any), the
    longest evaluation of it measured on this kind of machine (`measured_evaluation_seconds`, in FOLDER/COMPARISON),
    else the machine's estimate for the calibrated comparisons in proportion to the completion tokens it samples
    (n x tokens: Countdown's first is 512 of 800) and to its backend's speed. An evaluation a comparison reuses
    from another (`reuses`) costs nothing again."""
    tokens = {c: c.n * (c.tokens or TASKS[task]["max_tokens"]) for c in comparisons(task)}
    by_folder = {c.folder: c for c in tokens}

    def sampled(c) -> bool:
        reused = c.reuses and by_folder[c.reuses].includes(label)
        return c.includes(label) and not reused and (not only or c.folder in only)

    calibrated = sum(n for c, n in tokens.items() if c.folder in CALIBRATED)
    total = 0.0
    for comparison, n in tokens.items():
        if sampled(comparison):
            measured = measured_evaluation_seconds(folder / comparison.folder) if folder else None
            default = evaluation_seconds() * n / BACKEND_SPEED[comparison.backend] / calibrated
            total += default if measured is None else measured
    return total


MEASURED_MARGIN = 1.2  # on a measured evaluation's time: answers' lengths differ between entries
EVALUATION_START = 120.0  # seconds to start its server and load (or rebuild) the weights, not in timing.json


def measured_evaluation_seconds(comparison_dir: Path) -> float | None:
    """How long an evaluation of this comparison takes here: the longest of its finished evaluations' sampling
    (evals/LABEL/timing.json, written by `seedcast compare`) on this kind of machine, with a margin and the
    start-up; None where none was timed here."""
    here = machine_kind()
    seconds = []
    for path in sorted(comparison_dir.glob("evals/*/timing.json")):
        try:
            timing = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # advisory only: an unreadable record leaves the calibrated estimate
        if isinstance(timing, dict) and timing.get("machine") == here and timing.get("seconds_per_call"):
            seconds.append(timing["seconds_per_call"] * timing["calls"])
    return max(seconds) * MEASURED_MARGIN + EVALUATION_START if seconds else None


def summary(run_dir: Path) -> dict:
    """A run's summary.json (empty before it has finished)."""
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else {}


class OutOfTime(Exception):
    """The next run would not end before --stop-by (a run cut by the end of a session starts again)."""


def grpo_training_seconds(folder: Path, steps: int) -> float:
    """How long a GRPO run of `steps` steps trains, from the task's finished GRPO runs: those timed on this kind
    of machine where there are any (a retrained run), else all of them (older runs predate machine records)."""
    done = [summary(path.parent) for path in folder.glob("**/summary.json")]
    done = [s for s in done if s.get("method") == "grpo" and s.get("steps")]
    done = timed_here(done) or done
    steps_done = sum(s["steps"] for s in done)
    per_step = sum(s["wall_seconds"] for s in done) / steps_done if done else estimates().grpo_step
    return per_step * steps


def timed_here(summaries: list[dict]) -> list[dict]:
    """The run summaries that recorded this kind of machine."""
    here = machine_kind()
    return [s for s in summaries if s.get("machine") == here]


def grpo_seconds(folder: Path, steps: int) -> float:
    """How long a GRPO run of `steps` steps and its evaluations take, from the task's finished GRPO runs."""
    return grpo_training_seconds(folder, steps) + evaluation_seconds()


def es_seconds(folder: Path, iterations: int) -> float:
    """How long an ES run of `iterations` takes, from the probe once it exists: the one timed on this kind of
    machine where there is one (the probe or the probe made again here), else the original probe. Its evaluations
    may wait for a later session (its update log rebuilds its weights), so they are not counted."""
    probes = [summary(folder / PROBE), summary(folder / RETIMED_PROBE)]
    probe = next(iter(timed_here(probes)), probes[0])
    if not probe.get("steps"):
        defaults = estimates()
        return defaults.es_start + defaults.es_iteration * iterations
    fixed = probe.get("wall_seconds_this_session", probe["wall_seconds"]) - probe["wall_seconds"]
    return fixed + probe["wall_seconds"] / probe["steps"] * iterations


def stop_time(text: str, now: datetime | None = None) -> float:
    """--stop-by's `HH:MM` as the next such moment (seedcast.clock_time): past midnight too, never over 12 h away."""
    return next_clock_time(text, "--stop-by", now)


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
    return max(1, round((seconds - fixed) / seconds_per_iteration({"wall_seconds": iterating, **probe})))


def seconds_per_iteration(record: dict) -> float:
    """A finished run's seconds per iteration: its summary's iterating time over its iterations."""
    return record["wall_seconds"] / max(1, record.get("steps", 1))
