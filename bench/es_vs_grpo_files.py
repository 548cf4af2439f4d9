"""What `bench/es_vs_grpo.py` keeps of its runs between sessions, and how it gets them back.

Run folders (OUT/TASK/NAME) are not committed: a GRPO run's weights are 540 MB. What is committed, as soon as a
run ends, is everything else, under docs/results/es-vs-grpo/TASK/NAME; and as soon as a run's weights exist,
its evaluations for every comparison it belongs to (results.json, samples.jsonl, geometry.json, entry.json and
timing.json, from which the next evaluation's time is estimated),
under docs/results/es-vs-grpo/TASK/COMPARISON/evals/LABEL. A later session on a fresh checkout restores both
into OUT, so it neither trains a finished run again nor needs the weights of one whose evaluations exist.
"""

from __future__ import annotations

import shutil
from pathlib import Path

PUBLISHED_ROOT = Path("docs/results/es-vs-grpo")
# A run's files, except weights. An ES run's config and update log rebuild its weights bit for bit
# (`seedcast export`); a GRPO run keeps its numbers; a run started from another's weights (the hybrid's GRPO
# half) keeps the note of where they came from, so its budget still counts the whole chain.
RUN_FILES = (
    "plan-command.json",
    "config.yaml",
    "summary.json",
    "metrics.jsonl",
    "updates.jsonl",
    "trl_log.jsonl",
    "init-model/seedcast_export.json",
)
# pass_at_k_groups.png: the methods' curves and crossovers, made where the comparison writes claims.
COMPARE_FILES = (
    "report.md",
    "compare.json",
    "pass_at_k.png",
    "pass_at_k_groups.png",
    "reward_curves.png",
    "geometry.png",
)
# What `seedcast compare` needs to compare an entry again without its weights (and to judge the claims).
EVAL_FILES = ("results.json", "samples.jsonl", "entry.json", "geometry.json", "timing.json")
# Samples larger than this (n = 256 evaluations: megabytes each) are not committed: results.json keeps the
# per-problem counts and entropies that compare judges from. Such an evaluation is rescored (another built-in
# reward) only where its samples still are.
PUBLISHED_SAMPLES_LIMIT = 1 << 20


def _copy(source: Path, target: Path) -> bool:
    if not source.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    return True


def publish_run(run_dir: Path, task: str, name: str) -> Path:
    """Copy a finished run's small files to PUBLISHED_ROOT/TASK/NAME."""
    target = PUBLISHED_ROOT / task / name
    for file in RUN_FILES:
        _copy(run_dir / file, target / file)
    return target


def publish_evals(out: Path, task: str, labels: list[str] | None = None) -> Path:
    """Copy a comparison's per-entry evaluations (all, or those of `labels`) next to the runs."""
    target = PUBLISHED_ROOT / task / out.name
    for folder in sorted((out / "evals").glob("*")):
        if labels is None or folder.name in labels:
            for file in EVAL_FILES:
                if file != "samples.jsonl" or _size(folder / file) <= PUBLISHED_SAMPLES_LIMIT:
                    _copy(folder / file, target / "evals" / folder.name / file)
    return target


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def publish_compare(out: Path, task: str) -> Path:
    """Copy a comparison's report, plots and per-entry evaluations (not its exported models)."""
    target = PUBLISHED_ROOT / task / out.name
    for file in COMPARE_FILES:
        _copy(out / file, target / file)
    publish_evals(out, task)
    return target


def share_evaluation(source: Path, target: Path, label: str) -> bool:
    """Copy LABEL's evaluation from comparison folder `source` to `target`, made at the same settings, unless
    `target` has one: compare's cache then reuses it only if it measured the same weights the same way, and
    evaluates again otherwise. Returns whether it copied."""
    if (target / "evals" / label / "results.json").is_file() or not (
        source / "evals" / label / "results.json"
    ).is_file():
        return False
    for file in EVAL_FILES:
        _copy(source / "evals" / label / file, target / "evals" / label / file)
    return True


def restore(folder: Path, task: str) -> list[str]:
    """Copy published runs and evaluations into OUT/TASK where a fresh checkout lacks them; returns what came
    back. A run folder already there is left alone (it may hold weights), as is an evaluation already there."""
    published = PUBLISHED_ROOT / task
    restored = []
    for recorded in sorted(published.glob("**/plan-command.json")):
        name = recorded.parent.relative_to(published)
        if (recorded.parent / "summary.json").is_file() and not (folder / name / "summary.json").is_file():
            for file in RUN_FILES:
                _copy(recorded.parent / file, folder / name / file)
            restored.append(str(name))
    for results in sorted(published.glob("*/evals/*/results.json")):
        name = results.parent.relative_to(published)
        if not (folder / name / "results.json").is_file():
            for file in EVAL_FILES:
                _copy(results.parent / file, folder / name / file)
            restored.append(str(name))
    return restored
