"""Prometheus metrics: a real scrape of a server's /metrics after real calls, and the optimizer's."""

from __future__ import annotations

import asyncio
import urllib.request

import grpc
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.server import start_server
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field, start_metrics_server
from tests.test_server import BATCH, _task


def _scrape(port: int) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (
            sample.name,
            tuple(sorted((k, v) for k, v in sample.labels.items() if k not in ("backend", "model"))),
        ): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_server_metrics_scraped_over_http(tiny_model_dir):
    backend = create_backend("hf", tiny_model_dir, device="cpu", dtype="bfloat16", threads=1)
    registry = CollectorRegistry()
    metrics_port = start_metrics_server(0, "127.0.0.1", registry)

    async def scenario():
        running = await start_server(backend, "127.0.0.1", 0, registry=registry)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                stub = pb_grpc.InferenceServerStub(channel)
                call = stub.Evaluate()
                await call.write(pb.EvaluateRequest(batch=BATCH))
                await call.write(_task())
                result = await call.read()
                await call.write(_task(sign=0))
                with pytest.raises(grpc.aio.AioRpcError):
                    await call.read()
                update = pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=0.1)])
                await stub.ApplyUpdate(update)
                return result
        finally:
            await running.stop(0.5)

    result = asyncio.run(scenario())
    samples = _scrape(metrics_port)
    assert samples[("seedcast_server_members_evaluated_total", ())] == 1
    assert samples[("seedcast_server_tokens_generated_total", ())] == sum(result.result.completion_tokens)
    assert samples[("seedcast_server_rpc_errors_total", (("code", "INVALID_ARGUMENT"), ("method", "Evaluate")))] == 1
    assert samples[("seedcast_server_step", ())] == 1
    assert samples[("seedcast_server_updates_applied_total", ())] == 1
    for phase in ("perturb", "generate", "score", "restore"):
        assert samples[(f"seedcast_server_{phase}_seconds_count", ())] == 1
    assert samples[("seedcast_server_update_seconds_count", ())] == 1


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


def test_member_phases_are_the_fields_of_the_wire_timings():
    assert [phase_field(phase) for phase in MEMBER_PHASES] == [f.name for f in pb.Timings.DESCRIPTOR.fields]
