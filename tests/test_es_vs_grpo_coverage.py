"""bench/es_vs_grpo_coverage.py: coverage ES (pass@k fitness) at GRPO's wall time, its k chosen on the in-training
eval set, its budget timed only on this kind of machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_coverage as coverage  # noqa: E402
import es_vs_grpo_reference as reference  # noqa: E402

from seedcast.optimizer.config_files import load_config  # noqa: E402
from seedcast.optimizer.machine import machine_kind  # noqa: E402

ELSEWHERE = {"cpu": "Another CPU", "cores": 64, "isa": "amx_bf16", "gpu": None}


def _finished(run_dir: Path, wall: float, machine: dict | None, steps: int = 10) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"wall_seconds": wall, "steps": steps, "wall_seconds_this_session": wall + 20.0}
    (run_dir / "summary.json").write_text(json.dumps({**record, **({"machine": machine} if machine else {})}))
    return run_dir


def _maker(folder: Path, made: list, wall: float = 100.0, steps: int = 5):
    """The bench's `es` as the stage calls it: records each run and leaves a finished one timed on this machine."""

    def make_es(name, iterations, seed, extra=(), timed_against=()):
        made.append((name, iterations, seed, tuple(extra), [p.name for p in timed_against]))
        return _finished(folder / name, wall, machine_kind(), steps)

    return make_es


def _selection_sampler(sampled: list):
    """What `seedcast compare` leaves for each candidate: its pass@16 on the in-training eval set (k = 8 best)."""

    def sample(command):
        assert command[:2] == [sys.executable, "-m"] and command[2] == "seedcast.cli"
        command = command[3:]
        sampled.append(command)
        label = command[1].split("=")[0]
        folder = Path(command[command.index("--out") + 1]) / "evals" / label
        folder.mkdir(parents=True, exist_ok=True)
        score = 0.7 if label.endswith("k8") else 0.5
        (folder / "results.json").write_text(json.dumps({"pass_at_k": {"16": {"mean": score}}}))
        return True

    return sample


def test_a_coverage_member_makes_es_best_s_completions_and_its_config_is_valid():
    best = load_config("configs/es-best.yaml")
    for k in coverage.COVERAGE_KS:
        config = load_config("configs/es-best.yaml", list(coverage.coverage_options(k)))
        assert config.es.fitness == "pass_at_k" and config.es.fitness_k == k <= config.sampling.samples_per_prompt
        assert config.batch_size * config.sampling.samples_per_prompt == best.batch_size  # completions a member
        assert config.sampling.temperature == 1.0


def test_the_budget_comes_from_runs_timed_here_or_from_grpo_and_the_probe_made_again_here(tmp_path, monkeypatch):
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    grpo = [_finished(plan.folder / f"grpo@{s}", 1000.0 + 100 * s, machine_kind()) for s in range(3)]
    probe = _finished(plan.folder / "es:completions@0", 50.0, machine_kind(), steps=5)
    made = []
    timed, wall, pace = reference.wall_reference(plan, _maker(plan.folder, made), grpo, probe)
    assert timed == [*grpo, probe] and wall == 1100.0 and pace["wall_seconds"] == 50.0 and made == []
    unrecorded = [_finished(plan.folder / f"old@{s}", 1500.0, None) for s in range(2)]
    retrained = [_finished(plan.folder / f"old@{s}~retrained", 900.0 + s, machine_kind()) for s in range(2)]
    old_probe = _finished(plan.folder / "old-probe", 50.0, None, steps=5)
    timed, wall, pace = reference.wall_reference(plan, _maker(plan.folder, made, wall=80.0), unrecorded, old_probe)
    assert timed == [*retrained, plan.folder / reference.RETIMED_PROBE] and wall == 900.5 and pace["wall_seconds"] == 80
    assert made == [(reference.RETIMED_PROBE, 5, 0, (), [])]  # a measure of pace, timed against nothing
    timed, wall, _ = reference.wall_reference(plan, _maker(plan.folder, []), unrecorded, probe)
    assert timed == [*retrained, probe] and wall == 900.5  # the probe timed here serves as it is
    elsewhere = [_finished(plan.folder / "far", 1500.0, ELSEWHERE)]
    trained = []
    monkeypatch.setattr(reference, "retrain", lambda plan, run: trained.append(run.name) or plan.folder / "later")
    _, _, pace = reference.wall_reference(plan, _maker(plan.folder, []), elsewhere, probe)
    assert trained == ["far"] and pace == {}  # GRPO is trained again first; the budget waits for it


def test_runs_made_again_on_another_kind_of_machine_are_made_again_here(tmp_path, monkeypatch):
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    unrecorded = [_finished(plan.folder / "old@0", 1500.0, None)]
    _finished(plan.folder / "old@0~retrained", 900.0, ELSEWHERE)  # an earlier session's, on another machine
    _finished(plan.folder / reference.RETIMED_PROBE, 50.0, ELSEWHERE, steps=5)
    trained, made = [], []
    monkeypatch.setattr(reference, "retrain", lambda plan, run: trained.append(run.name) or plan.folder / "later")
    old_probe = _finished(plan.folder / "old-probe", 50.0, None, steps=5)
    _, _, pace = reference.wall_reference(plan, _maker(plan.folder, made), unrecorded, old_probe)
    assert trained == ["old@0"] and pace == {}
    _finished(plan.folder / "old@0~retrained", 900.0, machine_kind())
    _, wall, pace = reference.wall_reference(plan, _maker(plan.folder, made, wall=80.0), unrecorded, old_probe)
    assert [m[0] for m in made] == [reference.RETIMED_PROBE] and wall == 900.0 and pace["wall_seconds"] == 80.0


def test_k_is_the_candidate_with_the_best_pass_at_16_on_the_in_training_eval_set(tmp_path):
    for k, score in ((2, 0.61), (8, 0.66), (4, 0.66)):
        folder = tmp_path / "evals" / f"coverage:wall@k{k}"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps({"pass_at_k": {"16": {"mean": score}}}))
    labels = {k: f"coverage:wall@k{k}" for k in (2, 8, 4)}
    assert coverage.chosen_k(tmp_path, labels) == (4, {2: 0.61, 8: 0.66, 4: 0.66})  # a tie: the smaller k


def test_the_stage_samples_its_candidates_off_the_held_out_stream_then_makes_seeds_1_and_2_at_the_chosen_k(
    tmp_path, monkeypatch
):
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    grpo = [_finished(plan.folder / f"grpo@{s}", 1000.0, machine_kind()) for s in range(3)]
    probe = _finished(plan.folder / "es:completions@0", 50.0, machine_kind(), steps=5)
    monkeypatch.setattr(coverage, "publish_evals", lambda *args: None)
    evaluated, sampled, made = [], [], []
    monkeypatch.setattr(plan, "evaluate", lambda label, run, rebuildable=False: evaluated.append((label, run.name)))

    # The bench's own `seedcast`, as run_plan passes it, down to the process it would start.
    monkeypatch.setattr(es_vs_grpo, "run_until_paused", _selection_sampler(sampled))
    runs = coverage.coverage_stage(plan, _maker(plan.folder, made), es_vs_grpo.seedcast, grpo, probe)
    assert all(c[c.index("--seed") + 1] == "1000003" and "--exclude-training-seeds" not in c for c in sampled)
    assert len(sampled) == len(coverage.COVERAGE_KS) and all("--evaluate-only" in c for c in sampled)
    assert runs == {
        "coverage:wall@0": plan.folder / "coverage/k8",
        "coverage:wall@1": plan.folder / "coverage:wall@1",
        "coverage:wall@2": plan.folder / "coverage:wall@2",
    }
    iterations = es_vs_grpo.iterations_for_wall(1000.0, json.loads((probe / "summary.json").read_text()))
    assert [m[:4] for m in made[-2:]] == [
        (f"coverage:wall@{s}", iterations, s, coverage.coverage_options(8)) for s in (1, 2)
    ]
    assert sorted(label for label, _ in evaluated) == sorted(runs)
    assert es_vs_grpo.comparisons("synthetic")[0].includes("coverage:wall@1")  # judged with everything else


def test_made_runs_are_the_budget_and_nothing_is_timed_again_on_another_kind_of_machine(tmp_path, monkeypatch):
    # Every coverage run made on another kind of machine (36 iterations there), GRPO and the probe too: an
    # invocation here (to compare, say) must reuse them, not train GRPO and the probe again, then every coverage
    # run at this machine's count.
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    grpo = [_finished(plan.folder / f"grpo@{s}", 1000.0, ELSEWHERE) for s in range(3)]
    probe = _finished(plan.folder / "es:completions@0", 50.0, ELSEWHERE, steps=5)
    for name in coverage.run_names():
        _finished(plan.folder / name, 1000.0, ELSEWHERE)
        (plan.folder / name / "plan-command.json").write_text(json.dumps(["seedcast", "train", "iterations=36"]))
    assert reference.made_budget(plan.folder, coverage.run_names()) == (
        36,
        [plan.folder / n for n in coverage.run_names()],
    )

    def timed_again(*args):
        raise AssertionError("timed again on this machine")

    monkeypatch.setattr(coverage, "wall_reference", timed_again)
    monkeypatch.setattr(coverage, "publish_evals", lambda *args: None)
    monkeypatch.setattr(plan, "evaluate", lambda label, run, rebuildable=False: None)
    monkeypatch.setattr(es_vs_grpo, "run_until_paused", _selection_sampler([]))
    made = []
    coverage.coverage_stage(plan, _maker(plan.folder, made), es_vs_grpo.seedcast, grpo, probe)
    assert [(m[0], m[1]) for m in made] == [(name, 36) for name in coverage.run_names()]
    assert all(m[4] == ["k2", "k8", "coverage:wall@1", "coverage:wall@2"] for m in made)  # a change is refused here
    (plan.folder / "coverage:wall@2" / "summary.json").unlink()  # one still to make: the budget is timed again
    assert reference.made_budget(plan.folder, coverage.run_names()) is None
