"""Which runs a new wall-matched run of bench/es_vs_grpo.py is timed against (the coverage and low-rank wall-time
runs): wall time is comparable only on the kind of machine it was measured on.

Where the task's GRPO runs and probe recorded this kind of machine, they are the reference. Where they predate
machine records (the arithmetic task's) or were timed on another kind of machine, GRPO's wall time comes from GRPO
trained again here from each run's recorded command (`NAME~retrained`, the runs the pass@k curve to 256 measures
anyway) and ES-best's pace from the probe made again here (`es:completions@0~retimed`), so no budget is timed on
one machine and spent on another. A run made again that an earlier session timed on another kind of machine is
made again here. A stage whose runs are all made keeps the budget they were made with (`made_budget`), and a
stage paced on another kind of machine is read with that machine's pace (`full_rank_reference`): a later
invocation elsewhere (to compare, say) times nothing again and trains nothing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from es_vs_grpo_retrain import retrain, retrained_dir
from es_vs_grpo_tasks import probe_iterations
from es_vs_grpo_time import RETIMED_PROBE, summary

from seedcast.optimizer.machine import describe, machine_kind


def pace_reference(plan, make_es: Callable, probe: Path) -> Path:
    """The run whose seconds per iteration are ES-best's pace on this machine: the probe if it recorded this kind of
    machine, else the probe made again here (a few minutes; it needs no GRPO run)."""
    if summary(probe).get("machine") == machine_kind():
        return probe
    discard_if_timed_elsewhere(plan, plan.folder / RETIMED_PROBE)
    return make_es(RETIMED_PROBE, probe_iterations(plan.task), 0)


def made_budget(folder: Path, names: list[str]) -> tuple[int, list[Path]] | None:
    """The iterations a stage's wall-matched runs NAMES were made with, once every one is made (its summary and the
    command that made it recorded) with one count, and those runs to time against; None before. They are then the
    stage's budget, timed against themselves: reused as made on any machine, and one whose command changed is
    refused on another kind."""
    counts = set()
    for name in names:
        recorded = folder / name / "plan-command.json"
        if not (folder / name / "summary.json").is_file() or not recorded.is_file():
            return None
        words = json.loads(recorded.read_text())
        counts.update(int(word.split("=", 1)[1]) for word in words if word.startswith("iterations="))
    return (counts.pop(), [folder / name for name in names]) if len(counts) == 1 else None


def full_rank_reference(plan, make_es: Callable, probe: Path, first_run: Path) -> Path | None:
    """ES-best's pace for a stage whose first run `first_run` is paced against it: where that run is made on another
    kind of machine, the probe (or the probe made again) recorded there, so the stage reads as it was decided there
    and anything it still lacks is refused here, or None when no record of that machine's pace is left (the probe
    made again since on a third kind); else `pace_reference`."""
    made_on = summary(first_run).get("machine")
    if made_on and made_on != machine_kind():
        for candidate in (probe, plan.folder / RETIMED_PROBE):
            if summary(candidate).get("machine") == made_on:
                return candidate
        return None
    return pace_reference(plan, make_es, probe)


def wall_reference(plan, make_es: Callable, grpo_runs: list[Path], probe: Path) -> tuple[list[Path], float, dict]:
    """The runs a new wall-matched run is timed against, GRPO's mean wall seconds and the summary whose seconds per
    iteration set ES's pace: the task's GRPO runs where all of them recorded this kind of machine, else GRPO trained
    again here (a finished retrained run serves, weights or not), with the pace of `pace_reference`. Empty while
    those are still to be made (a dry run prints them)."""
    here = machine_kind()
    timed = list(grpo_runs)
    if not all(summary(run).get("machine") == here for run in grpo_runs):
        timed = []
        for run in grpo_runs:
            again = retrained_dir(run)
            discard_if_timed_elsewhere(plan, again)
            timed.append(again if (again / "summary.json").is_file() else retrain(plan, run))
        if any(not summary(run) for run in timed):
            return timed, 0.0, {}
    pace = pace_reference(plan, make_es, probe)
    walls = [summary(run).get("wall_seconds") for run in timed]
    if not summary(pace) or None in walls:
        return [*timed, pace], 0.0, {}
    return [*timed, pace], sum(walls) / len(walls), summary(pace)


def discard_if_timed_elsewhere(plan, run_dir: Path) -> None:
    """Remove a run made again to be timed here that recorded another kind of machine (`runs/` kept from a session
    on another machine), so that it is made again here: a wall time means nothing on another kind."""
    recorded = summary(run_dir).get("machine")
    if recorded and recorded != machine_kind() and not plan.dry_run:
        print(f"# {run_dir.name} was timed on {describe(recorded)}, not here: made again", flush=True)
        shutil.rmtree(run_dir)
