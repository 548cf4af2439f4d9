"""A stand-in for the processes of bench/es_vs_grpo.py's whole plan, for tests: every run is taken as made and every
`seedcast` command is recorded instead of run, so a test drives `run_plan` through all its stages in a second."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402

COUNTDOWN_TO_THE_END = argparse.Namespace(task="countdown", until="compare", claims="claims.json")


def _finished_run(plan, name, *args, **kwargs) -> Path:
    """A run the bench takes as made: its summary and in-training evals."""
    run_dir = plan.folder / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps({"method": "grpo", "steps": 2, "wall_seconds": 600.0}))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"eval_reward": 0.5}))
    return run_dir


def plan_without_processes(monkeypatch, tmp_path: Path) -> tuple[list, list]:
    """Patch the bench so that its runs are made at once and nothing is started; returns the lists that collect
    each comparison's `compare` arguments and each evaluation's `seedcast` command."""
    compared, evaluated = [], []
    monkeypatch.setattr(es_vs_grpo, "grpo", _finished_run)
    monkeypatch.setattr(es_vs_grpo, "es", _finished_run)
    monkeypatch.setattr(es_vs_grpo, "restore", lambda folder, task: [])
    monkeypatch.setattr(es_vs_grpo, "seedcast", lambda command, comparison: evaluated.append(command) or True)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    monkeypatch.setattr(es_vs_grpo, "compare", lambda *args: compared.append(args))
    monkeypatch.setattr(es_vs_grpo, "coverage_stage", lambda *args: {})  # tests/test_es_vs_grpo_coverage.py
    return compared, evaluated
