"""bench/es_vs_grpo_lowrank_wall.py: low-rank ES at GRPO's wall time with the largest population whose batched
iteration costs no more than full rank's, paced on this machine; none trained when none is affordable."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_lowrank_wall as lowrank_wall  # noqa: E402

from seedcast.optimizer.config_files import load_config  # noqa: E402
from seedcast.optimizer.machine import machine_kind  # noqa: E402


def _finished(run_dir: Path, wall: float, steps: int) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"wall_seconds": wall, "steps": steps, "wall_seconds_this_session": wall + 20.0, "machine": machine_kind()}
    (run_dir / "summary.json").write_text(json.dumps(record))
    return run_dir


def _unrecorded_probe(folder: Path) -> Path:
    """The probe as the arithmetic task recorded it: 5 iterations of 50 s, before machines were recorded."""
    probe = folder / "es:completions@0"
    probe.mkdir(parents=True)
    (probe / "summary.json").write_text(json.dumps({"wall_seconds": 250.0, "steps": 5}))
    return probe


def _stage(tmp_path, monkeypatch, paces: dict[int, float]):
    """The stage with GRPO (1,000 s) and the probe (5 iterations of 50 s) timed here; pace runs take `paces`."""
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    grpo = [_finished(plan.folder / f"grpo@{s}", 1000.0, 10) for s in range(3)]
    probe = _finished(plan.folder / "es:completions@0", 250.0, 5)
    made, evaluated = [], []
    monkeypatch.setattr(plan, "evaluate", lambda label, run, rebuildable=False: evaluated.append(label))

    def make_es(name, iterations, seed, extra=(), timed_against=()):
        made.append((name, iterations, seed, tuple(extra)))
        population = int(name.rsplit("/p", 1)[1]) if "/p" in name else 0
        return _finished(plan.folder / name, paces.get(population, 50.0) * iterations, iterations)

    runs = lowrank_wall.lowrank_wall_stage(plan, make_es, grpo, probe)
    return runs, made, evaluated, plan


def test_a_wall_member_batch_is_a_valid_low_rank_config_of_the_population_asked():
    for population in lowrank_wall.WALL_POPULATIONS:
        config = load_config("configs/es-best.yaml", list(lowrank_wall.wall_options(population)))
        assert config.es.population == population and config.es.perturbation == "lowrank"
        assert config.es.rank == lowrank_wall.WALL_RANK
        assert config.fleet.members_per_batch == min(population, lowrank_wall.WALL_GROUP)


def test_the_largest_population_within_full_rank_s_pace_is_trained_at_grpo_s_wall_time(tmp_path, monkeypatch):
    runs, made, evaluated, plan = _stage(tmp_path, monkeypatch, {32: 45.0, 64: 80.0})
    paced = [m for m in made if ":pace/" in m[0]]
    assert [(m[0], m[1]) for m in paced] == [("lowrank1:pace/p32", 2), ("lowrank1:pace/p64", 2)]
    assert set(runs) == {f"lowrank1:wall@{s}" for s in range(3)} and sorted(evaluated) == sorted(runs)
    pace_record = json.loads((plan.folder / paced[0][0] / "summary.json").read_text())
    iterations = es_vs_grpo.iterations_for_wall(1000.0, pace_record)
    assert [m for m in made if ":wall@" in m[0]] == [
        (f"lowrank1:wall@{s}", iterations, s, lowrank_wall.wall_options(32)) for s in range(3)
    ]


def test_no_run_is_trained_when_no_population_above_full_rank_s_is_affordable(tmp_path, monkeypatch, capsys):
    runs, made, evaluated, _ = _stage(tmp_path, monkeypatch, {32: 55.0, 64: 90.0})
    assert runs == {} and evaluated == [] and [m[0] for m in made] == ["lowrank1:pace/p32"]  # 64 would cost more
    assert "population chosen: none above 16" in capsys.readouterr().out
    assert lowrank_wall.affordable_population(50.0, {32: 50.0, 64: 50.1}) == 32  # equal pace is affordable


def test_pacing_needs_no_grpo_run_timed_here_only_the_probe_made_again(tmp_path, monkeypatch):
    """Reference runs that predate machine records: the probe is made again here to pace against, and GRPO is not
    trained again while no population is affordable."""
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    old = []
    for name, wall, steps in (("grpo@1", 1000.0, 10), ("es:completions@0", 250.0, 5)):
        (plan.folder / name).mkdir(parents=True)
        (plan.folder / name / "summary.json").write_text(json.dumps({"wall_seconds": wall, "steps": steps}))
        old.append(plan.folder / name)
    retrained, made = [], []
    monkeypatch.setattr(lowrank_wall, "wall_reference", lambda *args: retrained.append(args) or ([], 0.0, {}))

    def make_es(name, iterations, seed, extra=(), timed_against=()):
        made.append((name, [p.name for p in timed_against]))
        return _finished(plan.folder / name, (40.0 if extra else 30.0) * iterations, iterations)

    assert lowrank_wall.lowrank_wall_stage(plan, make_es, old[:1], old[1]) == {}
    retimed = "es:completions@0~retimed"
    assert made == [(retimed, []), ("lowrank1:pace/p32", [retimed])]
    assert retrained == []  # 40 s against full rank's 30 s: nothing to train, so GRPO's wall time is not needed


def test_a_dry_run_prints_the_pace_runs_a_real_run_would_make(tmp_path):
    """A dry run stops where a real one would: after a recorded pace run that was too slow, and prints every
    candidate while none is recorded."""
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=True)
    grpo = [_finished(plan.folder / "grpo@0", 1000.0, 10)]
    probe = _finished(plan.folder / "es:completions@0", 250.0, 5)  # 50 s an iteration
    printed = []

    def make_es(name, iterations, seed, extra=(), timed_against=()):
        printed.append(name)
        return plan.folder / name  # a dry run makes nothing

    assert lowrank_wall.lowrank_wall_stage(plan, make_es, grpo, probe) == {}
    assert printed == ["lowrank1:pace/p32", "lowrank1:pace/p64"]
    _finished(plan.folder / "lowrank1:pace/p32", 110.0, 2)  # 55 s an iteration: too slow
    printed.clear()
    assert lowrank_wall.lowrank_wall_stage(plan, make_es, grpo, probe) == {}
    assert printed == ["lowrank1:pace/p32"]


def test_a_stage_paced_on_another_kind_of_machine_is_read_with_that_machine_s_pace(tmp_path, monkeypatch, capsys):
    """Its pace run and the probe made again were recorded on another kind of machine (55 s against 50 s there: none
    affordable); an invocation here reads that decision, and makes and times nothing again."""
    elsewhere = {"cpu": "Another CPU", "cores": 64, "isa": "amx_bf16", "gpu": None}
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    for name, wall, steps in (("es:completions@0~retimed", 250.0, 5), ("lowrank1:pace/p32", 110.0, 2)):
        (plan.folder / name).mkdir(parents=True)
        record = {"wall_seconds": wall, "steps": steps, "machine": elsewhere}
        (plan.folder / name / "summary.json").write_text(json.dumps(record))
    probe = _unrecorded_probe(plan.folder)
    made = []

    def make_es(name, iterations, seed, extra=(), timed_against=()):
        made.append((name, [p.name for p in timed_against]))
        return plan.folder / name  # made already: the bench's Plan.run returns it as it is

    assert lowrank_wall.lowrank_wall_stage(plan, make_es, [], probe) == {}
    assert made == [("lowrank1:pace/p32", ["es:completions@0~retimed"])]  # no probe made again here
    assert "full rank (16 members one at a time) 50.0 s" in capsys.readouterr().out


def test_a_stage_paced_where_no_pace_is_recorded_any_more_is_kept_as_made(tmp_path, capsys):
    """Paced on one kind of machine, the probe made again since on a third: nothing is paced or trained here."""
    plan = es_vs_grpo.Plan("synthetic", tmp_path, dry_run=False)
    third = {"cpu": "A third CPU", "cores": 8, "isa": "avx512_bf16", "gpu": None}
    pace = plan.folder / "lowrank1:pace/p32"
    pace.mkdir(parents=True)
    (pace / "summary.json").write_text(json.dumps({"wall_seconds": 110.0, "steps": 2, "machine": third}))
    probe = _unrecorded_probe(plan.folder)
    made = []
    runs = lowrank_wall.lowrank_wall_stage(plan, lambda *args, **kwargs: made.append(args), [], probe)
    assert runs == {} and made == []
    assert "kept as made there" in capsys.readouterr().out
