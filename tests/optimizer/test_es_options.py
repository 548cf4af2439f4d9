"""The ES options of a stronger ES together (per-prompt fitness, momentum, stochastic rounding, sampled
answers), end to end over real gRPC: reproducible bit for bit, resumable, exported to the servers' weights."""

from __future__ import annotations

import asyncio

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
