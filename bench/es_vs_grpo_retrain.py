"""GRPO runs trained again for a comparison that came after their weights were gone.

A GRPO run's weights (540 MB) are not committed: they outlive a session only where OUT does; its evaluations
for the comparisons that existed then are committed, and those comparisons keep judging the run through them. A
comparison added later (the pass@k curve to k = 256) needs weights again: the bench trains the run again from the
command it recorded (RUN/plan-command.json) into OUT/TASK/NAME~retrained, evaluates that run for the comparisons
that lack the original's evaluation, and prints whether it reproduced the original's in-training greedy eval
(GRPO on a CPU is seeded, but on another kind of machine its float sums may run in another order). An ES run never
needs this: its update log rebuilds its weights bit for bit.

On one kind of machine a retraining is bit for bit too (measured: docs/es-vs-grpo.md), so an evaluation of
retrained weights may pause at --stop-by and go on in a later session on that kind, from weights trained again
there: the calls carried over name the weights' fingerprint and are mixed in only if it matches
(`evaluation_to_fit`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from es_vs_grpo_partial import MIN_PARTIAL_SECONDS, PARTIAL_FILE, kinds_carried
from es_vs_grpo_tasks import TASKS
from es_vs_grpo_time import grpo_training_seconds

from seedcast.optimizer.machine import machine_kind
from seedcast.optimizer.run_kinds import run_kind
from seedcast.studies.compare import ENTRY_FILE, Entry, entry_identity

RETRAINED_SUFFIX = "~retrained"


def retrained_dir(run_dir: Path) -> Path:
    """Where a run trained again from its own command goes, beside the original."""
    return run_dir.with_name(run_dir.name + RETRAINED_SUFFIX)


def has_weights(run_dir: Path) -> bool:
    """Whether a GRPO run's trained model is still on disk."""
    return (run_dir / "model").is_dir()


def weights_kept(run_dir: Path | str) -> bool:
    """Whether a GRPO run's weights, or its retrained copy's, are in OUT: they outlive the session where OUT does
    (the same machine), so an evaluation of them may pause at --stop-by and go on later, as an ES run's does. On a
    machine without them the run is trained again, and calls carried over for other weights are set aside (each
    partial record names the weights' fingerprint)."""
    return isinstance(run_dir, Path) and (has_weights(run_dir) or has_weights(retrained_dir(run_dir)))


def evaluated(out: Path, label: str, run_dir: Path) -> bool:
    """Whether comparison folder OUT holds LABEL's evaluation of exactly this run (compare's own cache record)."""
    recorded = out / "evals" / label / ENTRY_FILE
    if not recorded.is_file() or not (run_dir / "summary.json").is_file():
        return False
    entry = Entry(label=label, path=str(run_dir), kind=run_kind(run_dir))
    return json.loads(recorded.read_text()).get("identity") == entry_identity(entry)


def evaluated_run(out: Path, label: str, run_dir: Path | str) -> Path | str:
    """The run a comparison measures for LABEL: the original if its evaluation is there (or can still be made,
    its weights being here), else its retrained copy once that exists."""
    if not isinstance(run_dir, Path) or evaluated(out, label, run_dir) or has_weights(run_dir):
        return run_dir
    again = retrained_dir(run_dir)
    return again if (again / "summary.json").is_file() else run_dir


def needs_retraining(out: Path, label: str, run_dir: Path) -> bool:
    """A finished GRPO run of the bench (original or retrained) that comparison OUT lacks an evaluation of and
    whose weights are gone."""
    finished = (run_dir / "summary.json").is_file() and (run_dir / "plan-command.json").is_file()
    return finished and not evaluated(out, label, run_dir) and not has_weights(run_dir)


def lacking_comparisons(plan, label: str, run_dir: Path) -> tuple[str, ...]:
    """The folders of `plan`'s comparisons that lack LABEL's evaluation of this GRPO run and can no longer make it
    (its weights gone): the evaluations a retraining of it is for."""
    return tuple(
        comparison.folder
        for comparison in plan.comparisons
        if comparison.includes(label)
        and needs_retraining(
            plan.folder / comparison.folder, label, evaluated_run(plan.folder / comparison.folder, label, run_dir)
        )
    )


def recorded_command(run_dir: Path) -> tuple[str, list[str], list[str]]:
    """The subcommand, options and overrides a run was made with (its plan-command.json, which the bench wrote
    as `seedcast SUBCOMMAND OPTIONS --run-dir DIR --no-progress OVERRIDES`)."""
    command = json.loads((run_dir / "plan-command.json").read_text())
    at = command.index("--run-dir")
    if command[at + 2] != "--no-progress":
        raise ValueError(f"{run_dir}/plan-command.json is not a bench command: {command}")
    return command[1], command[2:at], command[at + 3 :]


def reproduction_note(original: Path, retrained: Path) -> str:
    """One line: the original's and the retrained run's last in-training greedy eval, and whether they agree."""
    first, again = final_eval(original), final_eval(retrained)
    verdict = "reproduced" if first is not None and again is not None and abs(first - again) < 1e-9 else "differs"
    return f"{retrained.name}: final in-training eval {_show(again)} against the original's {_show(first)}: {verdict}"


def final_eval(run_dir: Path) -> float | None:
    """The last greedy eval reward a run logged (None if it logged none)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [row["eval_reward"] for row in rows if row.get("eval_reward") is not None]
    return evals[-1] if evals else None


def _show(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def evaluation_to_fit(plan, label: str, lacking: tuple[str, ...], full: float) -> float:
    """The seconds of LABEL's evaluation for the comparison folders `lacking` (all of it: `full`) that a retraining
    must leave time for before --stop-by. Where no call was carried over, or every call carried over ran on this
    kind of machine, the first MIN_PARTIAL_SECONDS: the rest goes on in a later session here, from the same weights
    trained again. Calls carried over from another kind of machine (or from before kinds were recorded) were drawn
    from other bits, and weights retrained here would set them aside, so then all of it must fit."""
    here = machine_kind()
    for folder in lacking:
        if any(kind != here for kind in kinds_carried(plan.folder / folder / "evals" / label / PARTIAL_FILE)):
            return full
    return min(full, MIN_PARTIAL_SECONDS)


def retrain(plan, run_dir: Path, evaluation: float = 0.0) -> Path:
    """Train a GRPO run again from its recorded command through `plan` (es_vs_grpo.Plan: its `run` skips a finished
    run, prints every command and honours --stop-by), once per run even if several comparisons need it; returns
    the retrained run's folder. `evaluation` is the seconds of evaluation that must follow in this session
    (es_vs_grpo.Plan.evaluate asks for `evaluation_to_fit`): --stop-by starts no retraining that would not end
    with it."""
    again = retrained_dir(run_dir)
    if plan.dry_run and again in plan.retrained:
        return again  # printed for an earlier comparison
    plan.retrained.add(again)
    if (again / "summary.json").is_file() and not has_weights(again) and not plan.dry_run:
        shutil.rmtree(again)  # trained again in an earlier session, whose weights went with it
    subcommand, options, overrides = recorded_command(run_dir)
    steps = next((int(o.split("=")[1]) for o in overrides if o.startswith("grpo.steps=")), None)
    steps = steps or TASKS[plan.task]["grpo_steps"]
    name = str(again.relative_to(plan.folder))
    plan.run(name, subcommand, options, overrides, estimate=grpo_training_seconds(plan.folder, steps) + evaluation)
    if not plan.dry_run:
        print(f"# {reproduction_note(run_dir, again)}", flush=True)
    return again
