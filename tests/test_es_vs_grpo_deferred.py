"""The bench's comparisons wait on evaluations that --stop-by left for later (bench/es_vs_grpo.py): a comparison's
`seedcast compare` evaluates whatever it lacks itself, with no deadline, so running it then would overrun the
session by every deferred evaluation."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402


def _finished_run(plan, name, *args, **kwargs) -> Path:
    """A run the bench takes as made: its summary and in-training evals."""
    run_dir = plan.folder / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps({"method": "grpo", "steps": 2, "wall_seconds": 600.0}))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"eval_reward": 0.5}))
    return run_dir


def _plan_without_processes(monkeypatch, tmp_path: Path, stop_by: float | None) -> tuple[list, list]:
    """Run the whole plan with every run made and every `seedcast` command recorded, not run."""
    compared, evaluated = [], []
    monkeypatch.setattr(es_vs_grpo, "grpo", _finished_run)
    monkeypatch.setattr(es_vs_grpo, "es", _finished_run)
    monkeypatch.setattr(es_vs_grpo, "restore", lambda folder, task: [])
    monkeypatch.setattr(es_vs_grpo, "seedcast", lambda command, comparison: evaluated.append(command) or True)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    monkeypatch.setattr(es_vs_grpo, "compare", lambda *args: compared.append(args))
    monkeypatch.setattr(es_vs_grpo, "coverage_stage", lambda *args: {})  # tests/test_es_vs_grpo_coverage.py
    arguments = argparse.Namespace(task="countdown", until="compare", claims="claims.json")
    es_vs_grpo.run_plan(es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=stop_by), arguments)
    return compared, evaluated


def test_the_comparisons_wait_on_evaluations_left_for_later(tmp_path, monkeypatch, capsys):
    overrun = {"es:wall@1"}  # one ES run whose evaluation would not end by --stop-by
    monkeypatch.setattr(es_vs_grpo, "overruns", lambda plan, label, least=0.0: label in overrun)
    with pytest.raises(es_vs_grpo.OutOfTime, match="the comparisons wait on es:wall@1's evaluations"):
        _plan_without_processes(monkeypatch, tmp_path, stop_by=es_vs_grpo.time.time() + 3600)
    assert "es:wall@1: evaluations left for a later invocation" in capsys.readouterr().out
    overrun.clear()  # the next invocation evaluates it, then compares
    compared, _ = _plan_without_processes(monkeypatch, tmp_path, stop_by=es_vs_grpo.time.time() + 3600)
    assert len(compared) == len(es_vs_grpo.comparisons("countdown"))
