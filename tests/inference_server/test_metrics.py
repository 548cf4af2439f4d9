"""The server's Prometheus metrics: a real scrape of /metrics after real calls."""

from __future__ import annotations

import asyncio
import urllib.request

import grpc
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.server import start_server
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.telemetry import start_metrics_server
from tests.inference_server.test_servicer import BATCH, _task


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
