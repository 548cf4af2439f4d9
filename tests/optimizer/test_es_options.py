"""The ES options of a stronger ES together (per-prompt fitness, momentum, stochastic rounding, sampled
answers), end to end over real gRPC: reproducible bit for bit, resumable, exported to the servers' weights."""

from __future__ import annotations

import asyncio
import re

import pytest

from seedcast.cli import main
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer
from tests.optimizer.test_end_to_end import _overrides


def _train(path, overrides):
    config = load_config(overrides=overrides)
    run = RunDirectory.create(path, config)
    return run, asyncio.run(Trainer(config, run, show_progress=False).train())


STRONG = {
    "es.fitness": "per_prompt",
    "es.momentum": 0.8,
    "es.rounding": "stochastic",
    "sampling.samples_per_prompt": 2,
    "fleet.pair_cache": "true",
    "eval_every": 0,
    "iterations": 3,
}


def test_all_options_together_reproduce_bit_for_bit_and_resume_and_export_to_the_servers_weights(
    tmp_path, tiny_model_dir
):
    overrides = _overrides(tiny_model_dir, **STRONG)
    first_run, first = _train(tmp_path / "first", overrides)
    assert all(step.rule == "momentum" and step.params == {"momentum": 0.8} for step in first_run.updates())
    assert all(r.update_terms > 0 for r in first.metrics)
    assert all(0 <= r.reward_min <= r.reward_max <= 1 for r in first.metrics)  # raw rewards, not normalised fitness
    # On one server instead of two, interrupted after 2 iterations and resumed: the same log, the same weights.
    part = [o for o in overrides if not o.startswith(("iterations=", "fleet.local="))]
    part_run, _ = _train(tmp_path / "part", [*part, "iterations=2", "fleet.local=1"])
    assert main(["train", "--resume", str(part_run.path), "--no-progress", "iterations=3"]) == 0
    assert part_run.updates_path.read_text() == first_run.updates_path.read_text()
    assert part_run.metrics()[-1].fingerprint == first.fingerprint
    out = tmp_path / "exported"
    assert main(["export", str(first_run.path), "--out", str(out)]) == 0
    assert '"matches_servers": true' in (out / "seedcast_export.json").read_text()


def test_momentum_cannot_change_on_resume(tmp_path, tiny_model_dir):
    config = load_config(overrides=_overrides(tiny_model_dir, **{"es.momentum": 0.5}))
    run = RunDirectory.create(tmp_path / "run", config)
    with pytest.raises(ConfigError, match="es.momentum is fixed for a run"):
        run.load_config(["es.momentum=0.9"])


def test_pass_at_k_fitness_is_the_mean_pass_at_k_of_the_samples_the_members_drew(tmp_path, tiny_model_dir):
    """es.fitness=pass_at_k end to end: with k = 1 each member's fitness is its mean reward, bit for bit; with
    k = m (4 samples) it is the share of prompts with a passing sample, at least as high, and higher here."""
    common = {
        "task.evaluator": "tests.tiny_model:contains_digit_reward",  # pass or fail on any text
        "sampling.samples_per_prompt": 4,
        "iterations": 1,
        "eval_every": 0,
        "fleet.local": 1,
    }
    runs = {
        name: _train(tmp_path / name, _overrides(tiny_model_dir, **common, **extra))[1].metrics[-1]
        for name, extra in {
            "mean": {},
            "pass@1": {"es.fitness": "pass_at_k", "es.fitness_k": 1},
            "pass@4": {"es.fitness": "pass_at_k", "es.fitness_k": 4},
        }.items()
    }
    assert runs["pass@1"].reward_mean == runs["mean"].reward_mean  # the same samples: pass@1 is the mean
    assert 0 < runs["mean"].reward_mean < runs["pass@4"].reward_mean <= 1


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["es.fitness=pass_at_k", "es.fitness_k=4", "sampling.temperature=1"], "sampling.samples_per_prompt >= es."),
        (["es.fitness=pass_at_k", "sampling.samples_per_prompt=2"], "sampling.temperature > 0"),
        (["es.fitness_k=4"], "es.fitness_k applies to es.fitness=pass_at_k only"),
    ],
)
def test_a_pass_at_k_fitness_that_cannot_be_estimated_is_refused(overrides, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_config(overrides=overrides)
