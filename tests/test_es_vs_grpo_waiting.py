"""bench/es_vs_grpo.py's use of a session's time: what it makes while a run that others wait on would not end by
--stop-by (bench/es_vs_grpo_waiting.py), so a session's last hour is not idle."""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_time  # noqa: E402


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _stage_recorder(plan, monkeypatch, probe_fits: bool) -> list[str]:
    """Record the runs (`run:NAME`) and evaluations (`eval:LABEL`) the bench makes, without making them."""
    made: list[str] = []

    def fake_es(plan, name, iterations, seed, extra=(), timed_against=()):
        if not probe_fits:
            raise es_vs_grpo_time.OutOfTime(f"{name} would take about 20 min")
        made.append(f"run:{name}:{iterations}")
        return plan.folder / name

    monkeypatch.setattr(es_vs_grpo, "es", fake_es)
    monkeypatch.setattr(plan, "evaluate", lambda label, run_dir, rebuildable=False: made.append(f"eval:{label}"))
    return made


def test_time_before_stop_by_too_short_for_a_grpo_run_goes_to_the_probe_and_the_base_s_evaluations(
    tmp_path, monkeypatch
):
    """grpo@1 would not end by --stop-by: the probe, the base's evaluations and the probe's are made meanwhile."""
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=time.time() + 3600)
    made = _stage_recorder(plan, monkeypatch, probe_fits=True)
    monkeypatch.setattr(es_vs_grpo, "restore", lambda folder, task: [])
    for name in ("3e-5-1.0", "1e-4-1.0"):
        run_dir = plan.folder / "grid" / name
        _write(run_dir / "summary.json", json.dumps({"method": "grpo", "steps": 4, "wall_seconds": 1.0}))
        _write(run_dir / "metrics.jsonl", json.dumps({"eval_reward": 0.5 if name == "1e-4-1.0" else 0.4}))

    def fake_grpo(plan, name, setting, seed, steps=None, init_from=None, timed_against=()):
        if name.startswith("grid/"):
            return plan.folder / name
        raise es_vs_grpo_time.OutOfTime(f"{name} would take about 130 min with its evaluations")

    monkeypatch.setattr(es_vs_grpo, "grpo", fake_grpo)
    args = argparse.Namespace(task="countdown", until="compare", claims="claims.json")
    with pytest.raises(es_vs_grpo_time.OutOfTime, match="grpo@1"):
        es_vs_grpo.run_plan(plan, args)
    assert made == ["eval:grpo@0", "run:es:completions@0:2", "eval:base", "eval:es:completions@0"]

    made.clear()
    with pytest.raises(es_vs_grpo_time.OutOfTime):
        es_vs_grpo.run_plan(plan, argparse.Namespace(task="countdown", until="grpo", claims="claims.json"))
    assert made == ["eval:grpo@0"]  # --until grpo: nothing of a later stage


def test_a_grid_leader_whose_retraining_would_not_fit_leaves_the_time_to_what_waits_on_no_grpo_run(
    tmp_path, monkeypatch
):
    """Every grid run is finished but grpo@0's weights are gone and its retraining would not end by --stop-by: the
    probe and the base's evaluations are made meanwhile, not nothing."""
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=time.time() + 3600)
    made = _stage_recorder(plan, monkeypatch, probe_fits=True)
    monkeypatch.setattr(es_vs_grpo, "restore", lambda folder, task: [])
    monkeypatch.setattr(es_vs_grpo, "grpo", lambda plan, name, *args, **kwargs: plan.folder / name)
    for name in ("3e-5-1.0", "1e-4-1.0"):
        _write(plan.folder / "grid" / name / "summary.json", json.dumps({"method": "grpo", "wall_seconds": 1.0}))
        _write(plan.folder / "grid" / name / "metrics.jsonl", json.dumps({"eval_reward": 0.5}))
    evaluated = []

    def evaluate(label, run_dir, rebuildable=False):
        if label == "grpo@0":
            raise es_vs_grpo_time.OutOfTime("grid/1e-4-1.0~retrained would take about 119 min with its evaluations")
        evaluated.append(label)

    monkeypatch.setattr(plan, "evaluate", evaluate)
    with pytest.raises(es_vs_grpo_time.OutOfTime, match="119 min"):
        es_vs_grpo.run_plan(plan, argparse.Namespace(task="countdown", until="compare", claims="claims.json"))
    assert made == ["run:es:completions@0:2"] and evaluated == ["base", "es:completions@0"]


def test_a_hybrid_whose_retraining_would_not_fit_leaves_the_time_to_the_stages_after_it(tmp_path, monkeypatch):
    """hybrid@0's weights are gone and its retraining with all of its evaluation would not end by --stop-by: the
    control, the low-temperature run and coverage, which do not wait on it, go on; the comparisons, which do, are
    not made, and the bench says it stopped for time."""
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=time.time() + 3600)
    made = _stage_recorder(plan, monkeypatch, probe_fits=True)
    monkeypatch.setattr(es_vs_grpo, "restore", lambda folder, task: [])
    monkeypatch.setattr(es_vs_grpo, "restore_partials", lambda published, folder: [])
    monkeypatch.setattr(es_vs_grpo, "grpo", lambda plan, name, *args, **kwargs: plan.folder / name)
    monkeypatch.setattr(es_vs_grpo, "coverage_stage", lambda plan, *args: made.append("coverage") or {})
    monkeypatch.setattr(es_vs_grpo, "compare", lambda *args: made.append("compare"))
    for name in ("grid/3e-5-1.0", "grid/1e-4-1.0", "grpo@1", "grpo@2", "es:completions@0"):
        _write(plan.folder / name / "summary.json", json.dumps({"method": "grpo", "steps": 4, "wall_seconds": 100.0}))
        _write(plan.folder / name / "metrics.jsonl", json.dumps({"eval_reward": 0.5}))
    evaluate = plan.evaluate

    def hybrid_out_of_time(label, run_dir, rebuildable=False):
        if label == "hybrid@0":
            raise es_vs_grpo_time.OutOfTime("hybrid@0~retrained would take about 174 min with its evaluations")
        evaluate(label, run_dir, rebuildable)

    monkeypatch.setattr(plan, "evaluate", hybrid_out_of_time)
    with pytest.raises(es_vs_grpo_time.OutOfTime, match="174 min"):
        es_vs_grpo.run_plan(plan, argparse.Namespace(task="countdown", until="compare", claims="claims.json"))
    after = made[made.index("run:hybrid-es@0:2") + 1 :]
    control, lowtemp = ["run:format:wall@0:4", "eval:format:wall@0"], ["run:lowtemp:wall@0:4", "eval:lowtemp:wall@0"]
    assert after == [*control, *lowtemp, "coverage"]
    plan.waiting = None
    es_vs_grpo.run_plan(plan, argparse.Namespace(task="countdown", until="lowtemp", claims="claims.json"))
    assert "174 min" in str(plan.waiting)  # --until before the comparisons: main still says what was left


def test_the_waiting_time_also_goes_to_es_runs_an_earlier_session_finished(tmp_path, monkeypatch):
    """Their update logs rebuild them, so their evaluations wait on no GRPO run; those not yet made are skipped."""
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False, stop_by=time.time() + 3600)
    made = _stage_recorder(plan, monkeypatch, probe_fits=True)
    for name in ("es:wall@0", "es:wall@2", "format:wall@0"):
        _write(plan.folder / name / "summary.json", json.dumps({"method": "es", "steps": 4, "wall_seconds": 1.0}))
    es_vs_grpo.use_waiting_time(plan, partial(es_vs_grpo.es, plan), es_vs_grpo.STAGES, [tmp_path / "grid"])
    assert made[-3:] == ["eval:es:wall@0", "eval:es:wall@2", "eval:format:wall@0"]
    made.clear()
    es_vs_grpo.use_waiting_time(plan, partial(es_vs_grpo.es, plan), es_vs_grpo.STAGES[:4], [tmp_path / "grid"])
    assert made[-3:] == ["eval:es:completions@0", "eval:es:wall@0", "eval:es:wall@2"]  # --until es: no control


def test_a_probe_that_would_not_end_by_stop_by_is_not_started_meanwhile(tmp_path, monkeypatch):
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=time.time() + 60)
    made = _stage_recorder(plan, monkeypatch, probe_fits=False)
    es_vs_grpo.use_waiting_time(plan, partial(es_vs_grpo.es, plan), es_vs_grpo.STAGES, [tmp_path / "grid"])
    assert made == []
    # no GRPO run finished: nothing is timed yet
    es_vs_grpo.use_waiting_time(plan, partial(es_vs_grpo.es, plan), es_vs_grpo.STAGES, [])
    assert made == []
