"""bench/es_vs_grpo_retrain.py: a GRPO run whose weights are gone is trained again, from its recorded command, for a
comparison that lacks its evaluation; the comparisons that have the original's keep it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from subprocess import CompletedProcess

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_partial  # noqa: E402
import es_vs_grpo_retrain  # noqa: E402

from seedcast.studies.compare import Entry, entry_identity  # noqa: E402


def _grpo_run(run_dir: Path, eval_reward: float, weights: bool = False) -> Path:
    """A finished GRPO run as the bench leaves it (its weights only while the session that made it lasts)."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"seed: 1\n# {run_dir.name}\n")
    (run_dir / "summary.json").write_text(json.dumps({"method": "grpo", "steps": 10, "wall_seconds": 900.0}))
    (run_dir / "trl_log.jsonl").write_text("")
    (run_dir / "metrics.jsonl").write_text(json.dumps({"eval_reward": eval_reward}) + "\n")
    command = ["seedcast", "grpo", "--config", "configs/synthetic-cpu.yaml", "--run-dir", str(run_dir)]
    (run_dir / "plan-command.json").write_text(json.dumps([*command, "--no-progress", "grpo.steps=10", "seed=1"]))
    if weights:
        (run_dir / "model").mkdir()
    return run_dir


def _evaluated(comparison: Path, label: str, run_dir: Path) -> None:
    folder = comparison / "evals" / label
    folder.mkdir(parents=True)
    identity = entry_identity(Entry(label=label, path=str(run_dir), kind="grpo"))
    (folder / "entry.json").write_text(json.dumps({"path": str(run_dir), "identity": identity}))
    (folder / "results.json").write_text("{}")


def _bench(monkeypatch, tmp_path, dry_run: bool = False, task: str = "synthetic"):
    plan = es_vs_grpo.Plan(task, tmp_path, dry_run=dry_run)
    trained, commands = [], []

    def run(name, subcommand, options, overrides, timed_against=(), estimate=0.0):
        trained.append((name, subcommand, options, overrides))
        if dry_run:
            print(f"seedcast {subcommand} --run-dir {plan.folder / name}")
        else:
            _grpo_run(plan.folder / name, 0.5, weights=True)
        return plan.folder / name

    monkeypatch.setattr(plan, "run", run)
    monkeypatch.setattr(es_vs_grpo, "seedcast", lambda command, comparison: commands.append(command) or True)
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    return plan, trained, commands


def _measured(commands: list[list[str]]) -> dict[str, str]:
    """Comparison folder -> the run its command evaluates."""
    return {Path(c[c.index("--out") + 1]).name: c[1].split("=", 1)[1] for c in commands}


def test_a_grpo_run_whose_weights_are_gone_is_trained_again_for_the_comparison_that_lacks_it(
    tmp_path, monkeypatch, capsys
):
    plan, trained, commands = _bench(monkeypatch, tmp_path)
    original = _grpo_run(plan.folder / "grpo@1", 0.5)
    for folder in ("compare", "compare-64-tokens"):
        _evaluated(plan.folder / folder, "grpo@1", original)
    plan.evaluate("grpo@1", original)
    again = plan.folder / "grpo@1~retrained"
    assert trained == [
        ("grpo@1~retrained", "grpo", ["--config", "configs/synthetic-cpu.yaml"], ["grpo.steps=10", "seed=1"])
    ]
    assert _measured(commands) == {
        "compare": str(original),  # its cache of the original stands
        "compare-64-tokens": str(original),
        "compare-256": str(again),
    }
    assert "grpo@1~retrained: final in-training eval 0.5000 against the original's 0.5000: reproduced" in (
        capsys.readouterr().out
    )
    # The final report of the curve compares the retrained run; the earlier comparisons the original.
    compared = []
    monkeypatch.setattr(es_vs_grpo, "seedcast", lambda command, comparison: compared.append(command) or True)
    monkeypatch.setattr(es_vs_grpo, "publish_compare", lambda out, task: out)
    for comparison in es_vs_grpo.comparisons("synthetic")[:3]:
        es_vs_grpo.compare(plan, comparison, {"grpo@1": original}, "claims.json")
    assert _measured(compared) == _measured(commands)


def test_a_retrained_run_whose_weights_went_with_an_earlier_session_is_trained_again(tmp_path, monkeypatch):
    plan, trained, commands = _bench(monkeypatch, tmp_path)
    original = _grpo_run(plan.folder / "grpo@1", 0.5)
    for folder in ("compare", "compare-64-tokens"):
        _evaluated(plan.folder / folder, "grpo@1", original)
    _grpo_run(plan.folder / "grpo@1~retrained", 0.25)  # finished, no model/: its evaluation was never made
    plan.evaluate("grpo@1", original)
    assert [name for name, *_ in trained] == ["grpo@1~retrained"]
    assert _measured(commands)["compare-256"] == str(plan.folder / "grpo@1~retrained")


def test_a_run_evaluated_everywhere_or_still_holding_its_weights_is_not_trained_again(tmp_path, monkeypatch):
    plan, trained, commands = _bench(monkeypatch, tmp_path)
    original = _grpo_run(plan.folder / "grpo@1", 0.5, weights=True)
    plan.evaluate("grpo@1", original)
    assert trained == [] and set(_measured(commands).values()) == {str(original)}


def test_a_dry_run_prints_each_retraining_once(tmp_path, monkeypatch, capsys):
    """Countdown's curve is judged under both rewards: two comparisons lack the run, one retraining serves both."""
    plan, trained, commands = _bench(monkeypatch, tmp_path, dry_run=True, task="countdown")
    original = _grpo_run(plan.folder / "grpo@1", 0.5)
    plan.evaluate("grpo@1", original)
    assert len(trained) == 1 and commands == []
    assert capsys.readouterr().out.count("grpo@1~retrained") == 1


def test_the_reproduction_note_says_when_the_retrained_run_differs(tmp_path):
    original = _grpo_run(tmp_path / "grpo@2", 0.40625)
    again = _grpo_run(tmp_path / "grpo@2~retrained", 0.375)
    note = es_vs_grpo_retrain.reproduction_note(original, again)
    assert note == "grpo@2~retrained: final in-training eval 0.3750 against the original's 0.4062: differs"


def _retraining_bench(tmp_path, monkeypatch, stop_in: float) -> tuple:
    """A plan whose grpo@1 lacks only its compare-256 evaluation, with 10 min of training and 30 of evaluation
    estimated, `stop_in` seconds before --stop-by; its training commands are recorded (the run made, weights
    and all), and so are its evaluations."""
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    original = _grpo_run(plan.folder / "grpo@1", 0.5)
    started, evaluations = [], []

    def train(command, **kwargs):
        started.append(command[3])
        _grpo_run(Path(command[command.index("--run-dir") + 1]), 0.5, weights=True)
        return CompletedProcess(command, 0)

    monkeypatch.setattr(es_vs_grpo.subprocess, "run", train)

    def evaluate(command, comparison):  # given --sample-until it pauses (exit status 3), else it finishes
        evaluations.append(command)
        return "--sample-until" not in command

    monkeypatch.setattr(es_vs_grpo, "seedcast", evaluate)
    monkeypatch.setattr(es_vs_grpo, "publish_run", lambda run_dir, task, name: tmp_path / "published")
    monkeypatch.setattr(es_vs_grpo, "publish_evals", lambda out, task, labels=None: tmp_path / "published")
    monkeypatch.setattr(es_vs_grpo_retrain, "grpo_training_seconds", lambda folder, steps: 600.0)
    for folder in ("compare", "compare-64-tokens"):  # these keep the original's: not counted
        _evaluated(plan.folder / folder, "grpo@1", original)
    counted = []

    def estimate(task, label, only=(), folder=None):
        counted.append(only)
        return 1800.0

    monkeypatch.setattr(es_vs_grpo, "evaluation_estimate", estimate)
    monkeypatch.setattr(es_vs_grpo_partial, "evaluation_estimate", estimate)
    plan.stop_by = es_vs_grpo.time.time() + stop_in
    return plan, original, started, evaluations, counted


def test_a_retraining_starts_with_time_for_its_training_and_the_first_part_of_its_evaluation_which_pauses(
    tmp_path, monkeypatch
):
    """Retrained on one kind of machine GRPO's weights come out the same bit for bit, so calls paused on them go on
    from weights trained again in a later session here: 10 min of training and 15 of its 30 min of evaluation fit
    in 27 min, and the evaluation samples until --stop-by; with 20 min left nothing starts."""
    plan, original, started, evaluations, counted = _retraining_bench(tmp_path, monkeypatch, stop_in=1200.0)
    with pytest.raises(es_vs_grpo.OutOfTime, match="grpo@1~retrained"):
        plan.evaluate("grpo@1", original)
    assert started == [] and counted[-1] == ("compare-256",)  # only the cached comparisons ran
    assert [c[c.index("--out") + 1].rsplit("/", 1)[1] for c in evaluations] == ["compare", "compare-64-tokens"]
    plan.stop_by = es_vs_grpo.time.time() + 1600.0  # the stubbed training takes no time: 27 min for 30 of sampling
    evaluations.clear()
    with pytest.raises(es_vs_grpo.OutOfTime, match="compare-256 evaluation paused"):
        plan.evaluate("grpo@1", original)
    assert started == ["grpo"] and _measured(evaluations)["compare-256"] == str(plan.folder / "grpo@1~retrained")
    assert "--sample-until" in evaluations[-1]


def _carried_calls(plan, label: str, machines: list[dict]) -> None:
    """LABEL's compare-256 partial record as a later session restores it: one finished call per kind given."""
    record = plan.folder / "compare-256" / "evals" / label / es_vs_grpo_partial.PARTIAL_FILE
    record.parent.mkdir(parents=True)
    header = {"fingerprint": "f", "problems": list(range(80)), "options": {"problems_per_call": 1}}
    calls = [{"call": i, "problems": [i], "seconds": 200.0, "machine": kind} for i, kind in enumerate(machines)]
    record.write_text("".join(json.dumps(row) + "\n" for row in [header, *calls]))


def test_calls_carried_from_another_kind_of_machine_hold_a_retraining_until_all_of_its_evaluation_fits(
    tmp_path, monkeypatch
):
    """Weights retrained here would set aside calls drawn from another kind of machine's bits, so the retraining
    waits for time for all of its evaluation; calls made on this kind do not hold it."""
    plan, original, started, evaluations, _ = _retraining_bench(tmp_path, monkeypatch, stop_in=2100.0)
    here = es_vs_grpo_retrain.machine_kind()
    _carried_calls(plan, "grpo@1", [here, {**here, "isa": "amx_bf16" if here["isa"] != "amx_bf16" else "avx2"}])
    with pytest.raises(es_vs_grpo.OutOfTime, match="grpo@1~retrained"):
        plan.evaluate("grpo@1", original)
    assert started == []
    plan.stop_by = es_vs_grpo.time.time() + 2500.0  # 40 min and a little: all of it fits, nothing pauses
    evaluations.clear()
    plan.evaluate("grpo@1", original)
    assert started == ["grpo"] and _measured(evaluations)["compare-256"] == str(plan.folder / "grpo@1~retrained")
    assert "--sample-until" not in evaluations[-1]


def test_calls_carried_from_this_kind_of_machine_let_a_retraining_start_and_pause_again(tmp_path, monkeypatch):
    plan, original, started, evaluations, _ = _retraining_bench(tmp_path, monkeypatch, stop_in=1600.0)
    here = es_vs_grpo_retrain.machine_kind()
    _carried_calls(plan, "grpo@1", [here, here])
    with pytest.raises(es_vs_grpo.OutOfTime, match="compare-256 evaluation paused"):
        plan.evaluate("grpo@1", original)
    assert started == ["grpo"] and "--sample-until" in evaluations[-1]


def test_calls_recorded_before_machines_were_kept_count_as_another_kind(tmp_path):
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    _carried_calls(plan, "grpo@1", [None])
    full = 1800.0
    assert es_vs_grpo_retrain.evaluation_to_fit(plan, "grpo@1", ("compare-256",), full) == full
    assert es_vs_grpo_retrain.evaluation_to_fit(plan, "grpo@2", ("compare-256",), full) == 15 * 60
    assert es_vs_grpo_retrain.evaluation_to_fit(plan, "grpo@2", ("compare-256",), 300.0) == 300.0


def test_a_retrained_run_s_evaluation_pauses_at_stop_by_and_goes_on_later_from_its_kept_weights(tmp_path, monkeypatch):
    """A retraining an earlier session made on this machine, its weights kept in OUT, is not made again: with 20
    min left its evaluation samples until --stop-by and pauses; a later session with too little time left waits
    for the next, and one with time makes the rest from the same weights."""
    plan, original, started, evaluations, _ = _retraining_bench(tmp_path, monkeypatch, stop_in=1200.0)
    again = _grpo_run(plan.folder / "grpo@1~retrained", 0.5, weights=True)
    with pytest.raises(es_vs_grpo.OutOfTime, match="compare-256 evaluation paused"):
        plan.evaluate("grpo@1", original)
    assert started == [] and _measured(evaluations)["compare-256"] == str(again)
    assert "--sample-until" in evaluations[-1]
    plan.stop_by = es_vs_grpo.time.time() + 600.0  # a later session's last 10 minutes
    evaluations.clear()
    plan.evaluate("grpo@1", original)
    assert started == [] and evaluations == []
    plan.stop_by = es_vs_grpo.time.time() + 3 * 3600.0
    plan.evaluate("grpo@1", original)
    assert started == [] and _measured(evaluations)["compare-256"] == str(again)
    assert "--sample-until" not in evaluations[-1]


def test_a_grpo_run_without_kept_weights_never_pauses(tmp_path):
    """Only a run whose weights outlive the session may leave an evaluation half made."""
    original = _grpo_run(tmp_path / "grpo@1", 0.5)
    assert not es_vs_grpo_retrain.weights_kept(original) and not es_vs_grpo_retrain.weights_kept("HuggingFaceTB/x")
    _grpo_run(tmp_path / "grpo@1~retrained", 0.5, weights=True)
    assert es_vs_grpo_retrain.weights_kept(original)
