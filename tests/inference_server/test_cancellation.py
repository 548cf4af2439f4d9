"""A call whose client goes away (cancelled, or past its deadline) frees the backend worker within a decoding
step: the next request is served at once, not after the abandoned generation, and the weights are restored."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest

from seedcast.inference_server.backends.base import BatchMember, GenerationStopped, Sampling
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.proto import seedcast_pb2 as pb
from tests.inference_server.test_servicer import BATCH, SAMPLING, _task, with_server

LONG = 60.0  # seconds an abandoned call would hold the worker if nothing stopped it


class StallingTestBackend(SimulatedLatencyTestBackend):
    """A test double whose every generation lasts LONG seconds unless told to stop; it records the stops."""

    def __init__(self) -> None:
        super().__init__(latency_seconds=LONG)
        self.stops = 0

    def generate(self, prompts, sampling, system_prompt="", with_entropy=False, stop=None):
        try:
            return super().generate(prompts, sampling, system_prompt, with_entropy, stop=stop)
        except GenerationStopped:
            self.stops += 1
            raise


def _update_is_served_at_once(stub) -> int:
    """An update needs the worker: it is answered within seconds only if the abandoned work let go of it."""
    step = pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=0.1)])
    return stub.ApplyUpdate(step, timeout=10)


@pytest.mark.parametrize("how", ["deadline", "cancel"])
def test_an_abandoned_sample_frees_the_worker(how):
    backend = StallingTestBackend()

    async def scenario(stub, channel, running):
        request = pb.SampleRequest(problems=BATCH.problems, sampling=SAMPLING)
        if how == "deadline":
            with pytest.raises(grpc.aio.AioRpcError) as late:
                await stub.Sample(request, timeout=0.5)
            assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        else:
            call = stub.Sample(request)
            await asyncio.sleep(0.5)
            call.cancel()
        started = time.perf_counter()
        reply = await _update_is_served_at_once(stub)
        return reply.step, time.perf_counter() - started

    step, seconds = with_server(backend, scenario)
    assert step == 1 and seconds < 10
    assert backend.stops == 1


def test_an_evaluate_stream_cancelled_mid_member_frees_the_worker_and_restores_the_weights():
    backend = StallingTestBackend()

    async def scenario(stub, channel, running):
        stream = stub.Evaluate()
        await stream.write(pb.EvaluateRequest(batch=BATCH))
        await stream.write(_task(seed=5))
        await asyncio.sleep(0.5)  # the member is perturbed and generating
        stream.cancel()
        return (await _update_is_served_at_once(stub)).step

    assert with_server(backend, scenario) == 1
    assert backend.stops == 1 and backend.active_seed is None  # restored


def _counting_forwards(backend: HFBackend, stop_at: int | None, stop: threading.Event) -> list[int]:
    """Count the model's forward passes; set `stop` during pass `stop_at`, as a cancellation arriving then."""
    calls = [0]

    def hook(module, args, output):
        calls[0] += 1
        if stop_at is not None and calls[0] == stop_at:
            stop.set()

    backend.model.register_forward_hook(hook)
    return calls


@pytest.mark.parametrize("batched", [False, True])
def test_hf_generation_ends_at_the_next_step_once_stopped(tiny_model_dir, batched):
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=1)
    stop = threading.Event()
    calls = _counting_forwards(backend, stop_at=3, stop=stop)
    sampling = Sampling(temperature=0.0, max_new_tokens=200)
    with pytest.raises(GenerationStopped):
        if batched:
            members = [BatchMember(seed=s, sigma=0.05, sign=1, rank=1) for s in (1, 2)]
            backend.generate_members(members, [0, 0], ["Count to a hundred."], sampling, stop=stop)
        else:
            backend.generate(["Count to a hundred."], sampling, stop=stop)
    assert calls[0] == 3  # 200 steps were allowed; none ran after the stop
    stop.clear()
    again = backend.generate(["Count to a hundred."], Sampling(temperature=0.0, max_new_tokens=4), stop=stop)
    assert again[0][0].tokens >= 1  # the backend serves the next call normally
