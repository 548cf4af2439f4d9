"""The bench's compare commands reproduce the committed comparison reports: the entries it would compare now (every
run whose record is committed), the problems, samples, token budget and claims part each report names."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_coverage  # noqa: E402
import es_vs_grpo_lowtemp  # noqa: E402
import es_vs_grpo_retrain  # noqa: E402


def _measured_run(comparison: str, label: str, path: str) -> str:
    """The run a committed comparison measures for LABEL: the pass@k curve to 256 came after GRPO's weights were gone,
    so it measures every GRPO run (and the hybrid's GRPO half) trained again from its recorded command."""
    retrained = comparison.startswith("compare-256") and label.split("@")[0] in ("grpo", "hybrid")
    return path + es_vs_grpo_retrain.RETRAINED_SUFFIX if retrained else path


def _bench_entries(task: str, grid_leader: str) -> dict[str, str]:
    """The entries the bench compares on TASK, in its order: the base and every run whose record is committed (the
    bench restores them into runs/ and compares each run it has), coverage:wall@0 being the candidate k the
    committed selection chose."""
    runs = f"runs/es-vs-grpo/{task}"
    published = REPO_ROOT / "docs" / "results" / "es-vs-grpo" / task
    runs_by_label = {
        "grpo@0": f"{runs}/grid/{grid_leader}",
        **{f"grpo@{s}": f"{runs}/grpo@{s}" for s in (1, 2)},
        "es:completions@0": f"{runs}/es:completions@0",
        **{f"es:wall@{s}": f"{runs}/es:wall@{s}" for s in (0, 1, 2)},
        "hybrid@0": f"{runs}/hybrid@0",
        "format:wall@0": f"{runs}/format:wall@0",
    }
    for rank in es_vs_grpo.TASKS[task]["lowrank_ranks"]:
        runs_by_label.update({f"lowrank{rank}:members@{s}": f"{runs}/lowrank{rank}:members@{s}" for s in (0, 1, 2)})
    runs_by_label.update({f"lowrank1:wall@{s}": f"{runs}/lowrank1:wall@{s}" for s in (0, 1, 2)})
    selection = published / es_vs_grpo_coverage.SELECTION.folder
    if selection.is_dir():
        labels = {k: f"coverage:wall@k{k}" for k in es_vs_grpo_coverage.COVERAGE_KS}
        k, _ = es_vs_grpo_coverage.chosen_k(selection, labels)
        runs_by_label["coverage:wall@0"] = f"{runs}/coverage/k{k}"
        runs_by_label.update({f"coverage:wall@{s}": f"{runs}/coverage:wall@{s}" for s in (1, 2)})
    runs_by_label[es_vs_grpo_lowtemp.LABEL] = f"{runs}/{es_vs_grpo_lowtemp.LABEL}"
    committed = {
        label: path
        for label, path in runs_by_label.items()
        if (published / Path(path).relative_to(runs) / "summary.json").is_file()
    }
    return {"base": "smollm2-135m-instruct", **committed}


@pytest.mark.parametrize(("task", "grid_leader"), [("synthetic", "3e-5-1.0"), ("countdown", "1e-4-1.0")])
def test_the_comparisons_are_the_committed_ones(task, grid_leader):
    """The bench's compare commands reproduce the committed reports (entries, problems, samples, dtype, claims)."""
    runs = f"runs/es-vs-grpo/{task}"
    entries = _bench_entries(task, grid_leader)
    assert {"grpo@0", "es:wall@2", "format:wall@0"} <= set(entries)  # the records every comparison measures
    published = REPO_ROOT / "docs" / "results" / "es-vs-grpo" / task
    made = [c for c in es_vs_grpo.comparisons(task) if (published / c.folder / "report.md").is_file()]
    # Countdown's pass@k curve to 256 is made once its evaluations exist (docs/es-vs-grpo.md); the arithmetic
    # task's is made.
    still_to_come = {"compare-256", "compare-256-strict"} if task == "countdown" else set()
    assert {c.folder for c in es_vs_grpo.comparisons(task)} - {c.folder for c in made} <= still_to_come
    for comparison in made:
        report = published / comparison.folder / "report.md"
        line = next(line for line in report.read_text().splitlines() if line.startswith("Command: "))
        committed = shlex.split(line.removeprefix("Command: ").strip("`"))
        measured = {label: _measured_run(comparison.folder, label, path) for label, path in entries.items()}
        labelled = [f"{label}={path}" for label, path in measured.items() if comparison.includes(label)]
        out = Path(runs) / comparison.folder
        command = ["seedcast", *es_vs_grpo.compare_command(task, comparison, labelled, out)]
        if comparison.claims_suffix is not None:
            command += ["--claims", "docs/results/claims.json", "--claims-task", task + comparison.claims_suffix]
        assert command == committed
