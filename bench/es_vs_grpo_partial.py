"""Evaluations longer than what is left of a session (Countdown's n = 256 ones take about 100 min here): the
bench samples what fits, stops at --stop-by (`seedcast compare --sample-until`, exit status 3), and commits the
finished calls, so the next session on a fresh checkout goes on from them instead of starting again.

The finished calls are the evaluation's OUT/.../evals/LABEL/partial.jsonl (studies/eval_resume.py), which also
holds the completions: about 100 KB per call of 4 problems x 256 answers, 30 KB compressed. It is published gzipped
beside the evaluation's other files as partial.jsonl.gz, restored into OUT by a later invocation, and removed from
docs/results once the evaluation's results.json is published. Its first line records the weights' fingerprint and
every sampling option, so calls carried over are mixed only into the same evaluation, never another.
"""

from __future__ import annotations

import gzip
import json
import math
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

from es_vs_grpo_time import evaluation_estimate

from seedcast.optimizer.atomic_file import write_atomically

PARTIAL_FILE = "partial.jsonl"  # as studies/eval_resume.py names it
PUBLISHED_PARTIAL = "partial.jsonl.gz"
EXIT_PAUSED = 3  # seedcast's exit status for an evaluation paused at --sample-until
# Less time than this left to --stop-by starts no evaluation: the server's start and the weights' rebuild take
# two minutes, and a Countdown n = 256 call three.
MIN_PARTIAL_SECONDS = 15 * 60


def calls_made(partial: Path) -> tuple[int, int] | None:
    """(calls finished, calls in all) of an evaluation's partial record, from its header's problems and options;
    None without a readable one."""
    try:
        return _calls_in(partial.read_text())
    except OSError:
        return None


def _calls_in(text: str) -> tuple[int, int] | None:
    lines = text.splitlines()
    try:
        header = json.loads(lines[0])
        calls = -(-len(header["problems"]) // header["options"]["problems_per_call"])
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return sum(1 for line in lines[1:] if line.strip()), calls


def kinds_carried(partial: Path) -> list[dict | None]:
    """The kind of machine each finished call of an evaluation's partial record ran on (None for a call recorded
    before kinds were kept); empty without a readable record."""
    try:
        lines = partial.read_text().splitlines()[1:]
    except OSError:
        return []
    kinds = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut off mid-write: studies/eval_resume.py drops it too
        kinds.append(row.get("machine") if isinstance(row, dict) and isinstance(row.get("machine"), dict) else None)
    return kinds


def share_left(eval_dir: Path) -> float:
    """The fraction of an evaluation's Sample calls still to make: 1.0 unless a partial record says otherwise."""
    made = calls_made(eval_dir / PARTIAL_FILE)
    return 1.0 if made is None or not made[1] else max(0.0, 1.0 - made[0] / made[1])


def overruns(plan, label: str, within: float = math.inf) -> bool:
    """Whether LABEL's evaluations that `plan` (es_vs_grpo.Plan) has still to make, less what an earlier session
    sampled, would not end by its --stop-by, with less than `within` seconds left before it (default: any)."""
    if plan.stop_by is None:
        return False
    missing = tuple(
        c.folder
        for c in plan.comparisons
        if c.includes(label) and not (plan.folder / c.folder / "evals" / label / "results.json").is_file()
    )  # an evaluation made before costs only compare's check that it still matches
    seconds = sum(
        evaluation_estimate(plan.task, label, (f,), plan.folder) * share_left(plan.folder / f / "evals" / label)
        for f in missing
    )
    left = plan.stop_by - time.time()
    return seconds > left and left < within


def sample_until(stop_by: float | None) -> list[str]:
    """`seedcast compare`'s options that stop sampling at --stop-by (nothing without one)."""
    return [] if stop_by is None else ["--sample-until", datetime.fromtimestamp(stop_by).strftime("%H:%M")]


def run_until_paused(command: list[str]) -> bool:
    """Run a seedcast command that may pause at --sample-until; True when it finished, False when it paused.
    Any other failure raises, as a plain run's would."""
    completed = subprocess.run(command)
    if completed.returncode == EXIT_PAUSED:
        return False
    if completed.returncode:
        raise subprocess.CalledProcessError(completed.returncode, command)
    return True


def publish_partial(eval_dir: Path, published: Path) -> Path | None:
    """Copy EVAL_DIR's partial record, gzipped, to PUBLISHED/partial.jsonl.gz (written whole, then renamed);
    returns it, or None when EVAL_DIR has none."""
    source = eval_dir / PARTIAL_FILE
    if not source.is_file():
        return None
    published.mkdir(parents=True, exist_ok=True)
    target = published / PUBLISHED_PARTIAL
    temporary = target.with_name(target.name + ".tmp")
    with source.open("rb") as raw, gzip.open(temporary, "wb", compresslevel=9) as packed:
        shutil.copyfileobj(raw, packed)
    temporary.replace(target)
    return target


def publish_progress(eval_dir: Path, published: Path) -> Path | None:
    """After an evaluation's command, with its finished files published to PUBLISHED: publish its partial record
    if it paused (returns it), or remove the published one that has served once its results.json is written."""
    if (eval_dir / "results.json").is_file():
        (published / PUBLISHED_PARTIAL).unlink(missing_ok=True)
        return None
    return publish_partial(eval_dir, published)


def restore_partials(published_root: Path, folder: Path) -> list[str]:
    """Unpack every published partial record into FOLDER (OUT/TASK) where that evaluation is neither finished
    there nor further along there; returns the evaluations restored."""
    restored = []
    for packed in sorted(published_root.glob("*/evals/*/" + PUBLISHED_PARTIAL)):
        name = packed.parent.relative_to(published_root)
        target = folder / name / PARTIAL_FILE
        if (folder / name / "results.json").is_file():
            continue
        with gzip.open(packed, "rt") as unpacked:
            text = unpacked.read()
        here, carried = calls_made(target), _calls_in(text)
        if carried is not None and (here is None or carried[0] > here[0]):
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(target, text)
            restored.append(f"{name} ({carried[0]} of {carried[1]} calls)")
    return restored
