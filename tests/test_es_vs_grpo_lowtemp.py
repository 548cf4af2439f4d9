"""bench/es_vs_grpo_lowtemp.py: Countdown's ES-best with members scored at T = 0.3, one seed at es:wall's iterations,
judged beside everything else."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_lowtemp as lowtemp  # noqa: E402

from seedcast.optimizer.config_files import load_config  # noqa: E402


def test_its_members_are_scored_on_answers_sampled_at_0_3_in_float32():
    task = es_vs_grpo.TASKS["countdown"]["overrides"]
    config = load_config("configs/es-best.yaml", [*task, *lowtemp.lowtemp_options()])
    assert config.sampling.temperature == 0.3 and config.model.dtype == "float32"
    assert config.task.dataset == "countdown" and config.es.fitness == "per_prompt"  # ES-best otherwise


def test_countdown_makes_one_run_at_es_wall_s_iterations_and_evaluates_it_for_its_comparisons(tmp_path, monkeypatch):
    made, evaluated = [], []
    for task in ("countdown", "synthetic"):
        plan = es_vs_grpo.Plan(task, tmp_path, dry_run=False)
        monkeypatch.setattr(plan, "evaluate", lambda label, run, rebuildable=False: evaluated.append(label))

        def make_es(name, iterations, seed, extra=(), timed_against=(), folder=plan.folder):
            made.append((name, iterations, seed, tuple(extra)))
            return folder / name

        runs = lowtemp.lowtemp_stage(plan, make_es, 10)
        assert runs == ({lowtemp.LABEL: plan.folder / lowtemp.LABEL} if task == "countdown" else {})
    assert made == [(lowtemp.LABEL, 10, 0, lowtemp.lowtemp_options())] and evaluated == [lowtemp.LABEL]
    judged = [c.folder for c in es_vs_grpo.comparisons("countdown") if c.includes(lowtemp.LABEL)]
    assert "compare" in judged and "compare-greedy" in judged
