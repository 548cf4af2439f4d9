"""The gRPC server on a real socket: health, state, updates, evaluation, and bad requests refused
with a precise status while the weights stay untouched."""

from __future__ import annotations

import asyncio
import math
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.server import start_server
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc

SAMPLING = pb.SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=6, samples_per_prompt=1, seed=1)
BATCH = pb.PromptBatch(
    iteration=0,
    evaluator="tests.tiny_model:digit_fraction_reward",
    problems=[pb.Problem(prompt="What is 1 + 1?", reference="2"), pb.Problem(prompt="What is 2 + 3?", reference="5")],
)


def _task(**overrides) -> pb.EvaluateRequest:
    fields = {
        "iteration": 0,
        "member": 0,
        "seed": 11,
        "sign": 1,
        "sigma": 0.01,
        "sampling": SAMPLING,
        "expected_step": 0,
        **overrides,
    }
    return pb.EvaluateRequest(task=pb.MemberTask(**fields))


def _batched(*tasks: pb.EvaluateRequest) -> list[pb.EvaluateRequest]:
    """The batch, then `tasks` in one message to generate together."""
    return [
        pb.EvaluateRequest(batch=BATCH),
        pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[t.task for t in tasks], batched=True)),
    ]


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return create_backend("hf", tiny_model_dir, device="cpu", dtype="bfloat16", threads=1)


def with_server(backend, scenario):
    """Run `scenario(stub, channel, running)` against a fresh server on a free loopback port."""

    async def main():
        running = await start_server(backend, "127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                return await scenario(pb_grpc.InferenceServerStub(channel), channel, running)
        finally:
            await running.stop(0.5)

    return asyncio.run(main())


def test_health_and_state(backend):
    async def scenario(stub, channel, running):
        health = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="seedcast.v1.InferenceServer")
        )
        state = await stub.GetState(pb.StateRequest())
        return health.status, state

    status, state = with_server(backend, scenario)
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert state.step == 0 and state.backend == "hf" and state.dtype == "bfloat16"
    assert state.weights_fingerprint == backend.fingerprint()


def test_evaluate_stream_answers_each_task_in_order(backend):
    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        await call.write(pb.EvaluateRequest(batch=BATCH))
        answers = []
        for member in range(3):
            await call.write(_task(member=member, seed=100 + member, sign=1 if member % 2 == 0 else -1))
            answers.append(await call.read())
        await call.done_writing()
        return answers

    before = backend.fingerprint()
    answers = with_server(backend, scenario)
    assert [a.result.member for a in answers] == [0, 1, 2]
    for answer in answers:
        assert len(answer.result.rewards) == 2
        assert all(0.0 <= r <= 1.0 for r in answer.result.rewards)
        assert answer.result.timings.generate_seconds > 0
        assert all(t >= 1 for t in answer.result.completion_tokens)
    assert backend.fingerprint() == before


def test_several_members_in_one_message_are_answered_in_one_message_in_order(backend):
    tasks = [_task(member=m, seed=100 + m, sign=1 if m % 2 == 0 else -1).task for m in range(3)]

    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        await call.write(pb.EvaluateRequest(batch=BATCH))
        await call.write(pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=tasks)))
        together = await call.read()
        singles = []
        for task in tasks:
            await call.write(pb.EvaluateRequest(task=task))
            singles.append(await call.read())
        await call.done_writing()
        return together, singles

    together, singles = with_server(backend, scenario)
    assert together.WhichOneof("kind") == "batch"
    assert [a.result.member for a in together.batch.responses] == [0, 1, 2]
    assert [list(a.result.rewards) for a in together.batch.responses] == [list(a.result.rewards) for a in singles]


def test_same_task_gives_same_rewards(backend):
    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        await call.write(pb.EvaluateRequest(batch=BATCH))
        results = []
        for _ in range(2):
            await call.write(
                _task(
                    sampling=pb.SamplingParams(
                        temperature=1.0, top_p=0.9, max_new_tokens=6, samples_per_prompt=2, seed=5
                    )
                )
            )
            results.append(list((await call.read()).result.rewards))
        return results

    first, second = with_server(backend, scenario)
    assert first == second


def test_summary_only_results_carry_the_same_mean_and_no_per_prompt_values(backend):
    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        await call.write(pb.EvaluateRequest(batch=BATCH))
        results = []
        for summary_only in (False, True):
            await call.write(
                _task(
                    summary_only=summary_only,
                    sampling=pb.SamplingParams(
                        temperature=1.0, top_p=1.0, max_new_tokens=6, samples_per_prompt=2, seed=3
                    ),
                )
            )
            results.append((await call.read()).result)
        return results

    full, summary = with_server(backend, scenario)
    assert len(full.rewards) == 2 and not summary.rewards and not summary.completion_tokens
    scored = [r for r in full.rewards if not math.isnan(r)]
    assert full.reward_mean == summary.reward_mean == sum(scored) / len(scored)  # bit for bit
    assert full.prompts_scored == summary.prompts_scored == len(scored)
    assert full.total_completion_tokens == summary.total_completion_tokens == sum(full.completion_tokens) > 0
    assert summary.ByteSize() < full.ByteSize()


def _expect_status(backend, requests, code, fragment):
    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        for request in requests:
            await call.write(request)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call.read()
        return raised.value

    before = backend.fingerprint()
    error = with_server(backend, scenario)
    assert error.code() == code, error.details()
    assert fragment in error.details()
    assert backend.fingerprint() == before


@pytest.mark.parametrize(
    ("requests", "code", "fragment"),
    [
        ([_task()], grpc.StatusCode.FAILED_PRECONDITION, "before any PromptBatch"),
        ([pb.EvaluateRequest(batch=BATCH), _task(sigma=math.nan)], grpc.StatusCode.INVALID_ARGUMENT, "sigma"),
        ([pb.EvaluateRequest(batch=BATCH), _task(sigma=-1.0)], grpc.StatusCode.INVALID_ARGUMENT, "sigma"),
        ([pb.EvaluateRequest(batch=BATCH), _task(sign=0)], grpc.StatusCode.INVALID_ARGUMENT, "sign"),
        ([pb.EvaluateRequest(batch=BATCH), _task(rank=257)], grpc.StatusCode.INVALID_ARGUMENT, "rank must be 0"),
        ([pb.EvaluateRequest(batch=BATCH), _task(pass_at_k=2)], grpc.StatusCode.INVALID_ARGUMENT, "pass_at_k = 2"),
        (_batched(_task(rank=1), _task(rank=1, pass_at_k=1)), grpc.StatusCode.INVALID_ARGUMENT, "share pass_at_k"),
        ([pb.EvaluateRequest(batch=BATCH), _task(iteration=4)], grpc.StatusCode.FAILED_PRECONDITION, "iteration"),
        ([pb.EvaluateRequest(batch=BATCH), _task(expected_step=3)], grpc.StatusCode.FAILED_PRECONDITION, "step"),
        (
            [
                pb.EvaluateRequest(batch=BATCH),
                _task(sampling=pb.SamplingParams(max_new_tokens=0, top_p=1, samples_per_prompt=1)),
            ],
            grpc.StatusCode.INVALID_ARGUMENT,
            "max_new_tokens",
        ),
        (
            [pb.EvaluateRequest(batch=pb.PromptBatch(iteration=0, evaluator="gsm8k"))],
            grpc.StatusCode.INVALID_ARGUMENT,
            "problems must not be empty",
        ),
        (
            [pb.EvaluateRequest(batch=pb.PromptBatch(iteration=0, evaluator="nope", problems=BATCH.problems))],
            grpc.StatusCode.INVALID_ARGUMENT,
            "unknown evaluator",
        ),
        ([pb.EvaluateRequest()], grpc.StatusCode.INVALID_ARGUMENT, "neither batch, task nor tasks"),
        (
            [pb.EvaluateRequest(batch=BATCH), pb.EvaluateRequest(tasks=pb.MemberTasks())],
            grpc.StatusCode.INVALID_ARGUMENT,
            "MemberTasks must hold 1 to 256 tasks, got 0",
        ),
        (
            [pb.EvaluateRequest(batch=BATCH), pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[_task().task] * 257))],
            grpc.StatusCode.INVALID_ARGUMENT,
            "got 257",
        ),
        (
            [
                pb.EvaluateRequest(batch=BATCH),
                pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[_task().task, _task(sign=0).task])),
            ],
            grpc.StatusCode.INVALID_ARGUMENT,
            "sign",
        ),
        (_batched(_task(rank=1), _task(rank=0)), grpc.StatusCode.INVALID_ARGUMENT, "share one rank >= 1"),
        (_batched(_task(), _task(member=1)), grpc.StatusCode.INVALID_ARGUMENT, "share one rank >= 1"),
        (_batched(_task(rank=1), _task(rank=1, shard=1, shards=2)), grpc.StatusCode.INVALID_ARGUMENT, "whole prompt"),
        (_batched(_task(rank=1, stochastic_rounding=True)), grpc.StatusCode.INVALID_ARGUMENT, "stochastic_rounding"),
        (
            _batched(
                _task(rank=1),
                _task(rank=1, sampling=pb.SamplingParams(top_p=1, max_new_tokens=3, samples_per_prompt=1)),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "sampling settings",
        ),
    ],
)
def test_bad_evaluate_requests_are_refused(backend, requests, code, fragment):
    _expect_status(backend, requests, code, fragment)


def test_raising_evaluator_fails_the_member_only(backend):
    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        batch = pb.PromptBatch(iteration=0, evaluator="tests.tiny_model:failing_reward", problems=BATCH.problems)
        await call.write(pb.EvaluateRequest(batch=batch))
        await call.write(_task())
        failed = await call.read()
        await call.write(pb.EvaluateRequest(batch=BATCH))
        await call.write(_task(member=1))
        return failed, await call.read()

    before = backend.fingerprint()
    failed, ok = with_server(backend, scenario)
    assert failed.HasField("failure") and "always fails" in failed.failure.error
    assert ok.HasField("result") and ok.result.member == 1
    assert backend.fingerprint() == before


def test_updates_must_be_in_order_finite_and_name_a_rule_the_server_applies(backend):
    async def scenario(stub, channel, running):
        errors = []
        for request in (
            pb.UpdateRequest(step=2, terms=[pb.SeedCoefficient(seed=1, coeff=0.1)]),
            pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=math.inf)]),
            pb.UpdateRequest(step=1, rule="adam"),
            pb.UpdateRequest(step=1, rule="momentum", params={"momentum": 1.0}),
            pb.UpdateRequest(step=1, rule="momentum"),
            pb.UpdateRequest(step=1, params={"momentum": 0.5}),  # the plain rule takes no parameter
            pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=0.1)], rank=100_000),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await stub.ApplyUpdate(request)
            errors.append(raised.value.code())
        state_before = await stub.GetState(pb.StateRequest())
        reply = await stub.ApplyUpdate(pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=0.01)]))
        return errors, state_before, reply

    errors, state_before, reply = with_server(backend, scenario)
    assert errors == [grpc.StatusCode.FAILED_PRECONDITION] + [grpc.StatusCode.INVALID_ARGUMENT] * 6
    assert state_before.step == 0
    assert reply.step == 1 and reply.weights_fingerprint != state_before.weights_fingerprint
    assert reply.weights_fingerprint == backend.fingerprint()


def test_sample_scores_n_completions(backend):
    async def scenario(stub, channel, running):
        return await stub.Sample(
            pb.SampleRequest(
                problems=BATCH.problems,
                evaluator="tests.tiny_model:digit_fraction_reward",
                sampling=pb.SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=5, samples_per_prompt=3, seed=2),
            )
        )

    reply = with_server(backend, scenario)
    assert len(reply.problems) == 2
    for problem in reply.problems:
        assert len(problem.completions) == len(problem.rewards) == len(problem.truncated) == 3
        assert all(0 <= r <= 1 for r in problem.rewards)


def test_unlisted_custom_evaluators_are_refused(backend):
    from seedcast.inference_server.validation import Limits

    async def main():
        running = await start_server(backend, "127.0.0.1", 0, limits=Limits(allowed_evaluators=("remote:",)))
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                stub = pb_grpc.InferenceServerStub(channel)
                outcomes = []
                for spec in ("shutil:rmtree", "tests.tiny_model:digit_fraction_reward", "gsm8k"):
                    try:
                        await stub.Sample(pb.SampleRequest(problems=BATCH.problems, evaluator=spec, sampling=SAMPLING))
                        outcomes.append("ok")
                    except grpc.aio.AioRpcError as error:
                        outcomes.append(error.code())
                return outcomes
        finally:
            await running.stop(0)

    assert asyncio.run(main()) == [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.PERMISSION_DENIED, "ok"]


class SlowUpdateTestBackend(SimulatedLatencyTestBackend):
    """A test double whose updates take a while, so a reader can look at the server while a Sync runs."""

    def apply_update(self, terms, rule="plain", params=None, rank=0):
        time.sleep(0.2)
        super().apply_update(terms, rule, params, rank)


def test_get_state_never_pairs_a_step_with_another_steps_fingerprint_while_a_sync_runs():
    backend = SlowUpdateTestBackend()
    steps = [pb.UpdateRequest(step=s, terms=[pb.SeedCoefficient(seed=s, coeff=0.1)]) for s in (1, 2, 3)]

    async def scenario(stub, channel, running):
        seen = set()
        sync = asyncio.ensure_future(stub.Sync(iter(steps)))
        while not sync.done():
            state = await stub.GetState(pb.StateRequest())
            seen.add((state.step, state.weights_fingerprint))
            await asyncio.sleep(0.02)
        return seen, await sync

    base = backend.fingerprint()
    seen, reply = with_server(backend, scenario)
    assert reply.step == 3 and reply.weights_fingerprint == backend.fingerprint()
    assert seen <= {(0, base), (3, reply.weights_fingerprint)}, seen


def test_idle_evaluate_streams_never_refuse_an_update_or_a_state_query():
    backend = SimulatedLatencyTestBackend()

    async def scenario(stub, channel, running):
        streams = []
        for _ in range(64):  # opened with the token and left idle, as many as the server runs calls
            stream = stub.Evaluate()
            await stream.write(pb.EvaluateRequest(batch=BATCH))
            streams.append(stream)
        await asyncio.sleep(0.5)  # every stream is admitted and waits for its tasks
        state = await stub.GetState(pb.StateRequest(), timeout=5)
        reply = await stub.ApplyUpdate(pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=1, coeff=0.1)]))
        extra = stub.Evaluate()  # the 65th stream is refused at once, not queued
        await extra.write(pb.EvaluateRequest(batch=BATCH))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await extra.read()
        for stream in streams:
            stream.cancel()
        return state.step, reply.step, refused.value.code()

    assert with_server(backend, scenario) == (0, 1, grpc.StatusCode.RESOURCE_EXHAUSTED)
