"""bench/es_vs_grpo.py --comparisons: a session makes only the comparisons it names, and nothing the others need
(their evaluations, or a GRPO run trained again for a comparison left out)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_time  # noqa: E402


def _grpo_run_without_weights(run_dir: Path) -> Path:
    """A GRPO run made in an earlier session: its files but not its weights."""
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"method": "grpo", "steps": 10, "wall_seconds": 900.0}))
    command = ["seedcast", "grpo", "--config", "configs/synthetic-cpu.yaml", "--run-dir", str(run_dir)]
    (run_dir / "plan-command.json").write_text(json.dumps([*command, "--no-progress", "grpo.steps=10", "seed=1"]))
    return run_dir


def _recording_plan(monkeypatch, tmp_path: Path, only: tuple[str, ...]):
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False, only=only)
    commands, trained = [], []
    monkeypatch.setattr(es_vs_grpo, "seedcast", lambda command, comparison: commands.append(command) or True)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    monkeypatch.setattr(plan, "run", lambda name, *args, **kwargs: trained.append(name))
    return plan, commands, trained


def test_only_the_named_comparisons_evaluate_and_no_grpo_run_is_trained_again_for_another(tmp_path, monkeypatch):
    plan, commands, trained = _recording_plan(monkeypatch, tmp_path, ("compare-lowrank",))
    gone = _grpo_run_without_weights(tmp_path / "old" / "grpo@1")  # its weights are gone: compare-256 would retrain it
    plan.evaluate("grpo@1", gone)
    assert commands == [] and trained == []
    plan.evaluate("lowrank4:members@1", tmp_path / "lowrank", rebuildable=True)
    outs = [command[command.index("--out") + 1] for command in commands]
    assert outs == [str(plan.folder / "compare-lowrank")] and trained == []
    everything, _, _ = _recording_plan(monkeypatch, tmp_path, ())
    assert len(everything.comparisons) > len(plan.comparisons) == 1


def test_a_misspelt_comparison_stops_the_bench_with_the_task_s_names():
    assert es_vs_grpo.comparison_names("synthetic", "compare-lowrank, compare") == ("compare-lowrank", "compare")
    with pytest.raises(SystemExit, match="no compare-lowrnk; it has .*'compare-lowrank'"):
        es_vs_grpo.comparison_names("synthetic", "compare-lowrank,compare-lowrnk")
    with pytest.raises(SystemExit, match="no compare-greedy"):  # Countdown's only
        es_vs_grpo.comparison_names("synthetic", "compare-greedy")


def test_the_evaluation_estimate_counts_only_the_named_comparisons(monkeypatch):
    monkeypatch.setattr(es_vs_grpo_time, "machine_kind", lambda: {"isa": "avx2"})
    every = es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@0")
    main_only = es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@0", ("compare",))
    reused = es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@0", ("compare-lowrank",))
    assert every > main_only > 0 and reused == 0  # compare-lowrank reuses the main comparison's evaluation


def _timed(comparison_dir: Path, label: str, calls: int, seconds_per_call: float, machine: dict) -> None:
    folder = comparison_dir / "evals" / label
    folder.mkdir(parents=True)
    timing = {"calls": calls, "timed_calls": calls, "seconds_per_call": seconds_per_call, "machine": machine}
    (folder / "timing.json").write_text(json.dumps(timing))


def test_an_evaluation_measured_on_this_kind_of_machine_sets_the_estimate_of_the_next(tmp_path, monkeypatch):
    here, elsewhere = {"isa": "avx2", "cores": 2}, {"isa": "avx2", "cores": 16}
    monkeypatch.setattr(es_vs_grpo_time, "machine_kind", lambda: here)
    default = es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@1", ("compare-256",), tmp_path)
    _timed(tmp_path / "compare-256", "grpo@0", 32, 1.0, elsewhere)  # another kind of machine: says nothing here
    assert es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@1", ("compare-256",), tmp_path) == default
    _timed(tmp_path / "compare-256", "grpo@1", 32, 30.0, here)
    _timed(tmp_path / "compare-256", "es:wall@0", 32, 60.0, here)  # the longest of a comparison's counts
    expected = 32 * 60.0 * es_vs_grpo_time.MEASURED_MARGIN + es_vs_grpo_time.EVALUATION_START
    assert es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@1", ("compare-256",), tmp_path) == expected
    assert expected < default  # the calibrated estimate is the conservative one
    compare_only = es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@1", ("compare",), tmp_path)
    assert compare_only == es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@1", ("compare",))  # untimed


def test_evaluations_already_made_are_not_left_for_later_by_stop_by(tmp_path, monkeypatch, capsys):
    plan, commands, _ = _recording_plan(monkeypatch, tmp_path, ("compare-256",))
    plan.stop_by = es_vs_grpo.time.time() + 60.0  # no n = 256 evaluation fits in a minute
    plan.evaluate("es:wall@1", tmp_path / "es", rebuildable=True)
    assert commands == [] and "left for a later invocation" in capsys.readouterr().out
    made = plan.folder / "compare-256" / "evals" / "es:wall@1"
    made.mkdir(parents=True)
    (made / "results.json").write_text("{}")
    plan.evaluate("es:wall@1", tmp_path / "es", rebuildable=True)  # compare's cache checks and reuses it
    assert [c[c.index("--out") + 1] for c in commands] == [str(plan.folder / "compare-256")]
    assert "left for a later invocation" not in capsys.readouterr().out


def test_run_estimates_prefer_the_runs_timed_on_this_kind_of_machine(tmp_path, monkeypatch):
    here, elsewhere = {"isa": "amx_bf16", "cores": 2}, {"isa": "avx512_bf16", "cores": 2}
    monkeypatch.setattr(es_vs_grpo_time, "machine_kind", lambda: here)

    def record(name: str, **fields) -> None:
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "summary.json").write_text(json.dumps(fields))

    record(es_vs_grpo_time.PROBE, method="es", steps=5, wall_seconds=150.0, wall_seconds_this_session=250.0)
    assert es_vs_grpo_time.es_seconds(tmp_path, 10) == pytest.approx(100.0 + 10 * 30.0)  # nothing timed here yet
    record(
        es_vs_grpo_time.RETIMED_PROBE,
        method="es",
        steps=5,
        wall_seconds=220.0,
        wall_seconds_this_session=300.0,
        machine=here,
    )
    assert es_vs_grpo_time.es_seconds(tmp_path, 10) == pytest.approx(80.0 + 10 * 44.0)

    record("grpo@1", method="grpo", steps=10, wall_seconds=1000.0)  # before machine records
    record("grpo@2", method="grpo", steps=10, wall_seconds=2000.0, machine=elsewhere)
    assert es_vs_grpo_time.grpo_training_seconds(tmp_path, 10) == pytest.approx(1500.0)
    record("grpo@1~retrained", method="grpo", steps=10, wall_seconds=1600.0, machine=here)
    assert es_vs_grpo_time.grpo_training_seconds(tmp_path, 10) == pytest.approx(1600.0)
