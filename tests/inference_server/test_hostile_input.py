"""Hostile input: property-based fuzzing of every RPC with malformed and extreme messages, oversized
messages, and a bounded load of concurrent callers. The server must stay up, answer every call with
a result or a precise status, and never change its weights except through a valid update."""

from __future__ import annotations

import asyncio
import resource
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.server import start_server
from seedcast.inference_server.validation import Limits
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc

# Codes a refusal may carry; UNKNOWN or INTERNAL would mean an unhandled error inside the server.
REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class ThreadedServer:
    """An in-process server on its own event loop thread, so blocking stubs can call it."""

    def __init__(self, limits: Limits, max_concurrent_rpcs: int = 64, latency: float = 0.0, backend=None) -> None:
        self.backend = backend or SimulatedLatencyTestBackend(latency)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.running = asyncio.run_coroutine_threadsafe(
            start_server(self.backend, "127.0.0.1", 0, limits=limits, max_concurrent_rpcs=max_concurrent_rpcs),
            self.loop,
        ).result()
        self.address = f"127.0.0.1:{self.running.port}"
        self.channel = grpc.insecure_channel(self.address)
        self.stub = pb_grpc.InferenceServerStub(self.channel)

    @property
    def step(self) -> int:
        return self.running.servicer.step

    def stop(self) -> None:
        self.channel.close()
        asyncio.run_coroutine_threadsafe(self.running.stop(0), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


@pytest.fixture(scope="module")
def server():
    served = ThreadedServer(
        Limits(
            max_prompts=16,
            max_prompt_chars=4096,
            max_new_tokens=64,
            max_samples_per_prompt=4,
            max_update_terms=32,
            allowed_evaluators=(),
        )
    )
    yield served
    served.stop()


def _call(function, *args) -> grpc.StatusCode:
    try:
        function(*args, timeout=10)
    except grpc.RpcError as error:
        assert error.code() in REFUSALS, f"{error.code()}: {error.details()}"
        return error.code()
    return grpc.StatusCode.OK


def _still_serving(server: ThreadedServer) -> None:
    state = server.stub.GetState(pb.StateRequest(), timeout=10)
    assert state.weights_fingerprint == server.backend.fingerprint()


extreme_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from([0.0, -0.0, 1e-320, 1e308, -1e308])
)
uint64 = st.integers(0, 2**64 - 1)
texts = st.text(max_size=64) | st.sampled_from(["", "x" * 5000, "\x00\ufffd", "ü" * 100])
evaluators = st.sampled_from(["gsm8k", "synthetic", "math-nonexistent", "os:system", "shutil:rmtree", "", ":", "a:b:c"])
problems = st.lists(st.builds(pb.Problem, prompt=texts, reference=texts), max_size=20)
sampling = st.builds(
    pb.SamplingParams,
    temperature=st.floats(width=32, allow_nan=True, allow_infinity=True),
    top_p=st.floats(width=32, allow_nan=True, allow_infinity=True),
    max_new_tokens=st.integers(0, 2**32 - 1),
    samples_per_prompt=st.integers(0, 2**32 - 1),
    seed=uint64,
    top_k=st.integers(0, 2**32 - 1),
    min_p=st.floats(width=32, allow_nan=True, allow_infinity=True),
    repetition_penalty=st.floats(width=32, allow_nan=True, allow_infinity=True),
    stop=st.lists(texts, max_size=20),
)
terms = st.lists(st.builds(pb.SeedCoefficient, seed=uint64, coeff=extreme_floats), max_size=40)
rules = st.sampled_from(["", "plain", "momentum"]) | st.text(max_size=100)
rule_params = st.dictionaries(st.sampled_from(["momentum"]) | st.text(max_size=20), extreme_floats, max_size=20)


@FUZZ
@given(step=st.integers(0, 2**64 - 1) | st.just(1), rule=rules, params=rule_params, terms=terms)
def test_fuzz_apply_update(server, step, rule, params, terms):
    before, step_before = server.backend.fingerprint(), server.step
    code = _call(server.stub.ApplyUpdate, pb.UpdateRequest(step=step, rule=rule, params=params, terms=terms))
    if code == grpc.StatusCode.OK:
        assert server.step == step_before + 1
    else:
        assert server.backend.fingerprint() == before and server.step == step_before
    _still_serving(server)


@FUZZ
@given(steps=st.lists(st.tuples(st.integers(0, 50), rules, rule_params, terms), max_size=5))
def test_fuzz_sync(server, steps):
    step_before = server.step
    requests = [pb.UpdateRequest(step=s, rule=rule, params=params, terms=t) for s, rule, params, t in steps]
    _call(server.stub.Sync, iter(requests))
    assert server.step >= step_before  # valid leading steps may apply; nothing is ever undone or skipped
    _still_serving(server)


@FUZZ
@given(problems=problems, evaluator=evaluators, sampling=sampling, system_prompt=texts)
def test_fuzz_sample(server, problems, evaluator, sampling, system_prompt):
    before = server.backend.fingerprint()
    _call(
        server.stub.Sample,
        pb.SampleRequest(problems=problems, evaluator=evaluator, sampling=sampling, system_prompt=system_prompt),
    )
    assert server.backend.fingerprint() == before
    _still_serving(server)


task = st.builds(
    pb.MemberTask,
    iteration=uint64,
    member=st.integers(0, 2**32 - 1),
    seed=uint64,
    sign=st.integers(-(2**31), 2**31 - 1) | st.sampled_from([1, -1]),
    sigma=extreme_floats,
    sampling=sampling,
    expected_step=uint64 | st.just(0),
)
batch = st.builds(
    pb.PromptBatch, iteration=uint64 | st.just(0), problems=problems, evaluator=evaluators, system_prompt=texts
)
evaluate_requests = st.lists(
    st.one_of(
        st.builds(pb.EvaluateRequest, task=task),
        st.builds(pb.EvaluateRequest, batch=batch),
        st.just(pb.EvaluateRequest()),
    ),
    max_size=6,
)


@FUZZ
@given(requests=evaluate_requests)
def test_fuzz_evaluate_stream(server, requests):
    before = server.backend.fingerprint()
    try:
        for response in server.stub.Evaluate(iter(requests), timeout=10):
            assert response.HasField("result") or response.HasField("failure")
    except grpc.RpcError as error:
        assert error.code() in REFUSALS, f"{error.code()}: {error.details()}"
    assert server.backend.fingerprint() == before
    assert server.backend.active_seed is None, "a perturbation was left behind"
    _still_serving(server)


def test_oversized_message_is_refused(server):
    huge = pb.SampleRequest(problems=[pb.Problem(prompt="x" * (65 * 1024 * 1024))], evaluator="gsm8k")
    assert _call(server.stub.Sample, huge) == grpc.StatusCode.RESOURCE_EXHAUSTED
    _still_serving(server)


def test_bounded_load_of_concurrent_callers():
    served = ThreadedServer(Limits(allowed_evaluators=()), max_concurrent_rpcs=8, latency=0.02)

    async def load(rounds: int) -> dict[str, int]:
        outcomes: dict[str, int] = {}
        async with grpc.aio.insecure_channel(served.address) as channel:
            stub, health = pb_grpc.InferenceServerStub(channel), health_pb2_grpc.HealthStub(channel)
            request = pb.SampleRequest(
                problems=[pb.Problem(prompt="What is 2 + 2?", reference="4")],
                evaluator="synthetic",
                sampling=pb.SamplingParams(top_p=1, max_new_tokens=4, samples_per_prompt=2),
            )

            async def one(call):
                try:
                    await call
                    key = "OK"
                except grpc.aio.AioRpcError as error:
                    key = error.code().name
                outcomes[key] = outcomes.get(key, 0) + 1

            for _ in range(rounds):
                calls = [stub.Sample(request, timeout=30) for _ in range(40)]
                calls += [health.Check(health_pb2.HealthCheckRequest(), timeout=30) for _ in range(40)]
                await asyncio.gather(*(one(call) for call in calls))
        return outcomes

    try:
        asyncio.run(load(2))  # warm-up: allocator pools, lazy imports
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        outcomes = asyncio.run(load(10))
        growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    finally:
        served.stop()
    assert set(outcomes) <= {"OK", "RESOURCE_EXHAUSTED"}, outcomes
    assert outcomes.get("OK", 0) >= 80 and outcomes.get("RESOURCE_EXHAUSTED", 0) >= 1, outcomes
    assert growth_mib < 100, f"peak memory grew by {growth_mib:.0f} MiB under load"


class FailingUpdateTestBackend(SimulatedLatencyTestBackend):
    """A test double whose update breaks halfway, as an out-of-memory error would."""

    def apply_update(self, terms, rule="plain", params=None, rank=0):
        self.master["w"] += 1.0
        raise MemoryError("simulated: out of memory halfway through the update")


def test_an_update_that_fails_midway_fences_the_server_itself():
    served = ThreadedServer(Limits(allowed_evaluators=()))
    served.backend.__class__ = FailingUpdateTestBackend
    try:
        update = pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=0.1)])
        with pytest.raises(grpc.RpcError) as raised:
            served.stub.ApplyUpdate(update, timeout=10)
        assert raised.value.code() == grpc.StatusCode.INTERNAL
        with pytest.raises(grpc.RpcError) as raised:
            served.stub.Sample(
                pb.SampleRequest(
                    problems=[pb.Problem(prompt="p")],
                    sampling=pb.SamplingParams(top_p=1, max_new_tokens=1, samples_per_prompt=1),
                ),
                timeout=10,
            )
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "restart it" in raised.value.details()
    finally:
        served.stop()


def _request_fields(message, seen: set[str]) -> list[str]:
    """Message.field of every string, bytes and repeated field reachable from a request message."""
    from google.protobuf.descriptor import FieldDescriptor

    if message.full_name in seen:
        return []
    seen.add(message.full_name)
    found = []
    for field in message.fields:
        if field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES) or field.is_repeated:
            found.append(f"{message.name}.{field.name}")
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            found.extend(_request_fields(field.message_type, seen))
    return found


def test_every_string_and_repeated_field_of_every_request_has_a_bound():
    from seedcast.inference_server.validation import FIELD_BOUNDS

    service = pb.DESCRIPTOR.services_by_name["InferenceServer"]
    seen: set[str] = set()
    fields = [name for method in service.methods for name in _request_fields(method.input_type, seen)]
    assert sorted(set(fields)) == sorted(FIELD_BOUNDS), "give every new request field a bound in validation.py"
    assert all(hasattr(Limits(), bound) for bound in FIELD_BOUNDS.values())


@pytest.mark.parametrize("field", ["system_prompt", "evaluator"])
def test_oversized_system_prompts_and_evaluator_specs_are_refused(server, field):
    sampling = pb.SamplingParams(top_p=1, max_new_tokens=1, samples_per_prompt=1)
    request = pb.SampleRequest(problems=[pb.Problem(prompt="p")], sampling=sampling, **{field: "x" * 200_015})
    assert _call(server.stub.Sample, request) == grpc.StatusCode.INVALID_ARGUMENT
    batch = pb.PromptBatch(iteration=0, problems=[pb.Problem(prompt="p")], **{field: "x" * 200_015})
    stream = server.stub.Evaluate(iter([pb.EvaluateRequest(batch=batch)]), timeout=10)
    with pytest.raises(grpc.RpcError) as raised:
        list(stream)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in raised.value.details()
    if field == "evaluator":  # the spec a state query asks the server to check, too
        assert _call(server.stub.GetState, pb.StateRequest(evaluator="x" * 200_015)) == grpc.StatusCode.INVALID_ARGUMENT
    _still_serving(server)


def _update(step: int) -> pb.UpdateRequest:
    return pb.UpdateRequest(step=step, terms=[pb.SeedCoefficient(seed=step, coeff=0.01)])


def test_a_sync_with_a_bad_step_is_refused_and_the_fingerprint_describes_the_weights_held():
    served = ThreadedServer(Limits(allowed_evaluators=()))
    try:
        base = served.stub.GetState(pb.StateRequest(), timeout=10).weights_fingerprint
        with pytest.raises(grpc.RpcError) as raised:
            served.stub.Sync(iter([_update(1), _update(3)]), timeout=10)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        state = served.stub.GetState(pb.StateRequest(), timeout=10)
        assert state.weights_fingerprint == served.backend.fingerprint()
        assert (state.step, state.weights_fingerprint) == (0, base)  # refused on arrival: nothing applied
        reply = served.stub.Sync(iter([_update(1), _update(2)]), timeout=10)
        assert reply.step == 2 and reply.weights_fingerprint == served.backend.fingerprint() != base
    finally:
        served.stop()


def test_a_sync_stream_is_refused_at_its_first_bad_message_without_waiting_for_the_rest():
    served = ThreadedServer(Limits(allowed_evaluators=()))

    def endless():
        yield _update(5)  # not the next step: refused at once
        while True:  # a client that never closes its stream; the server must not wait for it
            time.sleep(0.01)
            yield _update(6)

    try:
        with pytest.raises(grpc.RpcError) as raised:
            served.stub.Sync(endless(), timeout=10)
        assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "server still at step 0" in raised.value.details()
    finally:
        served.stop()


def test_a_sync_may_not_buffer_more_terms_than_its_bound():
    served = ThreadedServer(Limits(allowed_evaluators=(), max_sync_terms=10))
    try:
        many = [pb.UpdateRequest(step=s, terms=[pb.SeedCoefficient(seed=1, coeff=0.01)] * 4) for s in (1, 2, 3)]
        with pytest.raises(grpc.RpcError) as raised:
            served.stub.Sync(iter(many), timeout=10)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "terms per Sync" in raised.value.details()
        assert served.step == 0
    finally:
        served.stop()


class FailingNoiseTestSource:
    """A test double around a real noise source: it raises after `tensors` tensors were drawn for, as an
    out-of-memory error halfway through an update would, so the "update failed midway" path runs on a real
    backend. `tensors=None` passes everything through."""

    def __init__(self, source, tensors: int | None) -> None:
        self.source, self.tensors, self.names = source, tensors, set()

    def __getattr__(self, name):
        return getattr(self.source, name)

    def chunks(self, seed, name, *args, **kwargs):
        self.names.add(name)
        if self.tensors is not None and len(self.names) > self.tensors:
            raise RuntimeError(f"injected fault: update stopped after {self.tensors} tensors")
        return self.source.chunks(seed, name, *args, **kwargs)


def test_an_update_that_fails_midway_on_a_real_backend_is_never_served(tiny_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend

    backend = HFBackend(tiny_model_dir, device="cpu", dtype="bfloat16", threads=2)
    served = ThreadedServer(Limits(allowed_evaluators=()), backend=backend)
    base = backend.fingerprint()
    backend.noise = failing = FailingNoiseTestSource(backend.noise, tensors=3)
    try:
        with pytest.raises(grpc.RpcError) as raised:
            served.stub.ApplyUpdate(_update(1), timeout=30)
        assert raised.value.code() == grpc.StatusCode.INTERNAL and "injected fault" in raised.value.details()
        state = served.stub.GetState(pb.StateRequest(), timeout=10)
        assert state.step == 0 and state.weights_fingerprint == backend.fingerprint() != base  # half-applied
        failing.tensors = None
        for call, request in ((served.stub.ApplyUpdate, _update(1)), (served.stub.Sync, iter([_update(1)]))):
            with pytest.raises(grpc.RpcError) as raised:
                call(request, timeout=10)
            assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "restart it" in raised.value.details()
    finally:
        served.stop()
