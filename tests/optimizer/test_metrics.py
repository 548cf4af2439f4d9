"""The optimizer's Prometheus metrics follow a real run."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer


def test_optimizer_metrics_follow_the_run(tmp_path, tiny_model_dir):
    overrides = [
        f"model.name={tiny_model_dir}",
        "iterations=2",
        "batch_size=2",
        "eval_every=1",
        "eval_size=2",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "sampling.max_new_tokens=4",
        "sampling.temperature=1.0",
        "es.population=4",
        "es.sigma=0.05",
        "fleet.threads_per_server=1",
    ]
    config = load_config(overrides=overrides)
    registry = CollectorRegistry()
    result = asyncio.run(
        Trainer(config, RunDirectory.create(tmp_path / "run", config), show_progress=False, registry=registry).train()
    )
    labels = {"task": "synthetic", "model": tiny_model_dir}
    value = lambda name: registry.get_sample_value(name, labels)  # noqa: E731
    assert value("seedcast_optimizer_step") == 2
    assert value("seedcast_optimizer_members_evaluated_total") == 8
    assert value("seedcast_optimizer_members_failed_total") == 0
    assert value("seedcast_optimizer_iteration_seconds_count") == 2
    assert value("seedcast_optimizer_servers_up") == 1
    assert value("seedcast_optimizer_reward_mean") == pytest.approx(result.metrics[-1].reward_mean)
    assert value("seedcast_optimizer_eval_reward") == pytest.approx(result.metrics[-1].eval_reward)
    assert value("seedcast_optimizer_tokens_total") == sum(r.completion_tokens or 0 for r in result.metrics)
    truncated = sum(r.truncated_answers or 0 for r in result.metrics)
    assert value("seedcast_optimizer_truncated_answers_total") == truncated
