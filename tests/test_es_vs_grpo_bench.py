"""bench/es_vs_grpo.py's bookkeeping: what survives a fresh checkout, the machine guard, the compare commands."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_files  # noqa: E402
import es_vs_grpo_time  # noqa: E402

from seedcast.optimizer.machine import SPEED_FLAGS, describe, machine_kind  # noqa: E402
from tests.bench_plan_stand_in import COUNTDOWN_TO_THE_END, plan_without_processes  # noqa: E402


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _record_commands(monkeypatch, commands: list) -> None:
    """The bench's `seedcast` commands go to `commands` instead of running."""
    monkeypatch.setattr(es_vs_grpo, "seedcast", lambda command, comparison: commands.append(command) or True)


def _grpo_with_weights(tmp_path: Path) -> Path:
    """A GRPO run evaluated in the session that trained it: its model/ is still there."""
    (tmp_path / "grpo" / "model").mkdir(parents=True, exist_ok=True)
    return tmp_path / "grpo"


def test_a_wall_matched_run_is_made_only_on_the_machine_its_budget_was_timed_on(tmp_path):
    same, other, unrecorded = tmp_path / "same", tmp_path / "other", tmp_path / "unrecorded"
    _write(same / "summary.json", json.dumps({"wall_seconds": 1.0, "machine": machine_kind()}))
    elsewhere = {"cpu": "Another CPU", "cores": 64, "isa": "amx_bf16", "gpu": None}
    _write(other / "summary.json", json.dumps({"wall_seconds": 1.0, "machine": elsewhere}))
    _write(unrecorded / "summary.json", json.dumps({"wall_seconds": 1.0}))
    es_vs_grpo_time.require_same_machine("es:wall@0", [same])
    with pytest.raises(SystemExit, match="Another CPU, 64 cores, amx_bf16") as stopped:
        es_vs_grpo_time.require_same_machine("es:wall@0", [same, other])
    assert describe(machine_kind()) in str(stopped.value)
    with pytest.raises(SystemExit, match="timed on unrecorded"):
        es_vs_grpo_time.require_same_machine("es:wall@0", [unrecorded])


def test_machine_kind_names_what_sets_inference_speed():
    kind = machine_kind()
    assert set(kind) == {"cpu", "cores", "isa", "gpu"} and kind["cores"] >= 1
    assert kind["isa"] in (*SPEED_FLAGS, "baseline")
    assert describe(None) == "unrecorded"


def test_low_rank_runs_meet_full_rank_in_their_own_comparison_reusing_its_evaluations(tmp_path, monkeypatch):
    """A low-rank run is evaluated for compare-lowrank only; es:wall's evaluation there starts as a copy of the main
    comparison's (compare's cache checks it), so full rank is not sampled twice at the same settings."""
    main, lowrank = es_vs_grpo.comparisons("synthetic")[0], es_vs_grpo.comparisons("synthetic")[-1]
    assert not main.includes("lowrank1:members@0") and main.includes("es:wall@2") and main.includes("base")
    assert lowrank.includes("lowrank4:members@1") and lowrank.includes("es:wall@0") and not lowrank.includes("grpo@0")
    assert "compare-lowrank" not in [c.folder for c in es_vs_grpo.comparisons("countdown")]
    commands = []
    _record_commands(monkeypatch, commands)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    plan.evaluate("lowrank1:members@0", tmp_path / "lowrank", rebuildable=True)
    assert [c[c.index("--out") + 1] for c in commands] == [str(tmp_path / "synthetic" / "compare-lowrank")]
    evaluated = tmp_path / "synthetic" / "compare" / "evals" / "es:wall@0"
    for name in es_vs_grpo_files.EVAL_FILES:
        _write(evaluated / name, name)
    commands.clear()
    plan.evaluate("es:wall@0", tmp_path / "es", rebuildable=True)
    assert len(commands) == 4  # compare, compare-64-tokens, compare-256, compare-lowrank
    shared = tmp_path / "synthetic" / "compare-lowrank" / "evals" / "es:wall@0"
    assert (shared / "entry.json").read_text() == "entry.json"
    _write(shared / "results.json", "newer")  # an evaluation already there is never overwritten
    assert not es_vs_grpo_files.share_evaluation(evaluated.parent.parent, shared.parent.parent, "es:wall@0")
    assert (shared / "results.json").read_text() == "newer"


def test_no_run_starts_that_would_not_end_by_stop_by(tmp_path):
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=time.time() + 60)
    with pytest.raises(es_vs_grpo_time.OutOfTime, match="about 60 min"):
        plan.run("grpo@1", "grpo", [], [], estimate=3600.0)
    assert not (tmp_path / "countdown" / "grpo@1").exists()  # nothing started, nothing removed


def test_run_estimates_come_from_the_task_s_finished_runs(tmp_path):
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=True)
    defaults = es_vs_grpo_time.estimates()
    evaluation = defaults.evaluation
    assert es_vs_grpo_time.grpo_seconds(plan.folder, 10) == pytest.approx(10 * defaults.grpo_step + evaluation)
    assert es_vs_grpo_time.es_seconds(plan.folder, 10) == pytest.approx(defaults.es_start + 10 * defaults.es_iteration)
    for name, wall in (("grid/a", 900.0), ("grpo@1", 1100.0)):
        _write(plan.folder / name / "summary.json", json.dumps({"method": "grpo", "steps": 10, "wall_seconds": wall}))
    assert es_vs_grpo_time.grpo_seconds(plan.folder, 5) == pytest.approx(5 * 100.0 + evaluation)
    probe = {"method": "es", "steps": 5, "wall_seconds": 250.0, "wall_seconds_this_session": 370.0}
    _write(plan.folder / es_vs_grpo_time.PROBE / "summary.json", json.dumps(probe))
    # An ES run's evaluations may wait for a later session (its update log rebuilds it): not counted.
    assert es_vs_grpo_time.es_seconds(plan.folder, 10) == pytest.approx(120.0 + 10 * 50.0)


def test_default_estimates_follow_the_machine_kind(monkeypatch):
    monkeypatch.setattr(es_vs_grpo_time, "machine_kind", lambda: {"isa": "avx512_bf16"})
    assert es_vs_grpo_time.estimates() == es_vs_grpo_time.ESTIMATES["avx512_bf16"]
    for slower in ("avx2", "avx512f", "baseline"):
        monkeypatch.setattr(es_vs_grpo_time, "machine_kind", lambda isa=slower: {"isa": isa})
        assert es_vs_grpo_time.estimates() == es_vs_grpo_time.ESTIMATES["avx2"]
    assert es_vs_grpo_time.ESTIMATES["avx2"].grpo_step > 2 * es_vs_grpo_time.ESTIMATES["avx512_bf16"].grpo_step


def test_evaluations_that_would_overrun_stop_by_wait_when_their_weights_outlive_the_session(tmp_path, monkeypatch):
    """An ES run's (its update log rebuilds it) and a GRPO run's kept in OUT: with a minute left, neither starts."""
    commands = []
    _record_commands(monkeypatch, commands)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=time.time() + 60)
    plan.evaluate("es:wall@0", tmp_path / "es", rebuildable=True)
    plan.evaluate("grpo@1", _grpo_with_weights(tmp_path))
    assert commands == []
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=None)
    plan.evaluate("es:wall@0", tmp_path / "es", rebuildable=True)
    plan.evaluate("grpo@1", _grpo_with_weights(tmp_path))
    countdown = len(es_vs_grpo.comparisons("countdown"))  # the strict ones rescore what the others sampled
    assert len(commands) == 2 * countdown and all("--evaluate-only" in command for command in commands)


def test_runs_first_leaves_every_rebuildable_evaluation_for_later_but_never_a_grpo_run_s(tmp_path, monkeypatch):
    commands = []
    _record_commands(monkeypatch, commands)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, stop_by=None, runs_first=True)
    plan.evaluate("es:wall@0", tmp_path / "es", rebuildable=True)
    plan.evaluate("base", "smollm2-135m-instruct", rebuildable=True)
    assert commands == []
    plan.evaluate("grpo@1", _grpo_with_weights(tmp_path))
    assert len(commands) == len(es_vs_grpo.comparisons("countdown"))


def test_stop_by_takes_the_next_time_of_day_within_12_hours():
    evening = datetime(2026, 12, 1, 22, 15, 30)
    with pytest.raises(argparse.ArgumentTypeError, match="HH:MM"):
        es_vs_grpo_time.stop_time("half past", now=evening)
    assert es_vs_grpo_time.stop_time("23:40", now=evening) == datetime(2026, 12, 1, 23, 40).timestamp()
    assert es_vs_grpo_time.stop_time("00:50", now=evening) == datetime(2026, 12, 2, 0, 50).timestamp()  # after midnight
    with pytest.raises(argparse.ArgumentTypeError, match="has just passed"):
        es_vs_grpo_time.stop_time("22:14", now=evening)
    with pytest.raises(argparse.ArgumentTypeError, match="12 hours"):
        es_vs_grpo_time.stop_time("11:00", now=evening)


def test_the_best_finished_grid_run_is_evaluated_as_grpo_at_0_before_the_grid_ends(tmp_path, monkeypatch):
    """A grid split across sessions: its leader is evaluated while its weights exist, and only a finished run."""
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False)
    evaluated = []
    monkeypatch.setattr(plan, "evaluate", lambda label, run_dir: evaluated.append((label, run_dir.name)))
    grid = {name: plan.folder / "grid" / name for name in ("low", "high", "unfinished")}
    for name, reward in (("low", 0.2), ("high", 0.4)):
        _write(grid[name] / "summary.json", json.dumps({"method": "grpo", "steps": 4, "wall_seconds": 1.0}))
        _write(
            grid[name] / "metrics.jsonl", json.dumps({"eval_reward": 0.1}) + "\n" + json.dumps({"eval_reward": reward})
        )
    _write(grid["unfinished"] / "metrics.jsonl", json.dumps({"eval_reward": 0.9}))
    es_vs_grpo.evaluate_grid_leader(plan, {"unfinished": grid["unfinished"]})
    assert evaluated == []
    es_vs_grpo.evaluate_grid_leader(plan, grid)
    assert evaluated == [("grpo@0", "high")]


def test_an_evaluation_s_estimate_counts_the_completion_tokens_of_its_comparisons(monkeypatch):
    monkeypatch.setattr(es_vs_grpo_time, "machine_kind", lambda: {"isa": "avx2"})
    everything = es_vs_grpo_time.evaluation_seconds()
    # The estimate was measured on the first three (16 x 32 + 4 x 64 + 1 x 32 tokens); the curve's 256 x 32 tokens
    # are sampled by vLLM, 2.5 times as fast.
    curve = 256 * 32 / 2.5
    assert es_vs_grpo_time.evaluation_estimate("countdown", "base") == pytest.approx(everything * (800 + curve) / 800)
    # The probe is in the 32-token and the greedy comparisons only: n 16 x 32 + 1 x 32 tokens.
    assert es_vs_grpo_time.evaluation_estimate("countdown", "es:completions@0") == pytest.approx(everything * 544 / 800)
    assert es_vs_grpo_time.evaluation_estimate("synthetic", "es:completions@0") == pytest.approx(
        es_vs_grpo_time.evaluation_seconds() * 256 / (256 + 256)  # 16 x 16 of 16 x 16 + 4 x 64
    )
    # es:wall's low-rank comparison reuses its main evaluation; a low-rank run samples that comparison only.
    synthetic_curve = 256 * 16 / 2.5
    assert es_vs_grpo_time.evaluation_estimate("synthetic", "es:wall@1") == pytest.approx(
        everything * (512 + synthetic_curve) / 512
    )
    assert es_vs_grpo_time.evaluation_estimate("synthetic", "lowrank4:members@0") == pytest.approx(everything / 2)


def test_a_dry_run_prints_no_es_budget_before_grpo_s_seeds_have_run(tmp_path, monkeypatch, capsys):
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=True)
    monkeypatch.setattr(es_vs_grpo, "restore", lambda folder, task: [])
    for name in ("3e-5-1.0", "1e-4-1.0"):
        run_dir = plan.folder / "grid" / name
        _write(run_dir / "summary.json", json.dumps({"method": "grpo", "steps": 4, "wall_seconds": 3000.0}))
        _write(run_dir / "metrics.jsonl", json.dumps({"eval_reward": 0.5}))
    es_vs_grpo.run_plan(plan, argparse.Namespace(task="countdown", until="compare", claims="claims.json"))
    printed = capsys.readouterr().out
    assert "grpo@1" in printed and "grpo@2" in printed
    assert "iterations=" not in printed and "wall time of GRPO's seeds" in printed


def test_countdown_is_also_compared_greedily_on_held_out_problems(tmp_path, monkeypatch):
    """The greedy comparison: one answer per problem at temperature 0, on Countdown only, with its own part of the
    claims file (the claims one answer can judge)."""
    assert [c.folder for c in es_vs_grpo.comparisons("synthetic")] == [
        "compare",
        "compare-64-tokens",
        "compare-256",
        "compare-lowrank",
    ]
    greedy = next(c for c in es_vs_grpo.comparisons("countdown") if c.folder == "compare-greedy")
    command = es_vs_grpo.compare_command("countdown", greedy, ["grpo@1=runs/x"], Path("out"))
    flags = {command[i]: command[i + 1] for i in range(len(command) - 1) if command[i].startswith("--")}
    assert (flags["--n"], flags["--k"], flags["--temperature"], flags["--max-tokens"]) == ("1", "1", "0", "32")
    sampled = es_vs_grpo.compare_command("countdown", es_vs_grpo.comparisons("countdown")[0], [], Path("out"))
    assert "--temperature" not in sampled  # compare's default, 1.0: the committed evaluations' options unchanged

    commands = []
    _record_commands(monkeypatch, commands)
    monkeypatch.setattr(es_vs_grpo, "publish_compare", lambda out, task: out)
    plan = es_vs_grpo.Plan("countdown", tmp_path, dry_run=False)
    for comparison in es_vs_grpo.comparisons("countdown"):
        es_vs_grpo.compare(plan, comparison, {"base": "smollm2-135m-instruct"}, "claims.json")
    assert [c[c.index("--claims-task") + 1] if "--claims" in c else None for c in commands] == [
        "countdown",
        "countdown-64-tokens",
        "countdown-greedy",
        "countdown-strict",
        "countdown-greedy-strict",
        "countdown-256",
        "countdown-256-strict",
    ]


def test_countdown_is_judged_under_the_reward_its_runs_trained_on_and_under_the_strict_one():
    """Every Countdown run trains on, and every comparison but the strict ones scores with, the lenient reward that
    made the committed runs (pinned: the task's default is strict now); each strict comparison rescores a
    lenient one made at the same settings."""
    comparisons = {c.folder: c for c in es_vs_grpo.comparisons("countdown")}
    assert "task.evaluator=countdown" in es_vs_grpo.TASKS["countdown"]["overrides"]
    for comparison in comparisons.values():
        command = es_vs_grpo.compare_command("countdown", comparison, [], Path("out"))
        scored = [a.removeprefix("--set=task.evaluator=") for a in command if a.startswith("--set=task.evaluator=")]
        strict = comparison.folder.endswith("-strict")
        assert scored == ["countdown-strict" if strict else "countdown"], comparison.folder
        if strict:
            lenient = comparisons[comparison.reuses]
            assert (lenient.n, lenient.temperature, lenient.tokens) == (
                comparison.n,
                comparison.temperature,
                comparison.tokens,
            )
    synthetic = es_vs_grpo.compare_command("synthetic", es_vs_grpo.comparisons("synthetic")[0], [], Path("out"))
    assert not any(a.startswith("--set=task.evaluator=") for a in synthetic)  # its task's default, as it ran


def test_runs_first_stops_before_the_comparisons_once_every_run_is_done(tmp_path, monkeypatch, capsys):
    compared, evaluated = plan_without_processes(monkeypatch, tmp_path)
    arguments = COUNTDOWN_TO_THE_END
    es_vs_grpo.run_plan(es_vs_grpo.Plan("countdown", tmp_path, dry_run=False, runs_first=True), arguments)
    assert compared == [] and "without --runs-first" in capsys.readouterr().out
    labels = {part.split("=")[0] for command in evaluated for part in command if "=" in part and part[0] != "-"}
    assert labels == {"grpo@0", "grpo@1", "grpo@2", "hybrid@0"}  # GRPO runs' evaluations only: their weights go
    es_vs_grpo.run_plan(es_vs_grpo.Plan("countdown", tmp_path, dry_run=False), arguments)
    assert len(compared) == len(es_vs_grpo.comparisons("countdown"))
