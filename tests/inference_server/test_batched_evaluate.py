"""Low-rank members sent together (MemberTasks.batched): one generation, one answer per member."""

from __future__ import annotations

import grpc
import pytest

from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.proto import seedcast_pb2 as pb
from tests.inference_server.test_servicer import BATCH, _batched, _task, backend, with_server

__all__ = ["backend"]  # the module's hf backend fixture, shared


def test_low_rank_members_sent_together_are_answered_each_as_it_would_be_alone(backend):
    members = [_task(member=i, seed=20 + i // 2, sign=1 - 2 * (i % 2), rank=1, summary_only=False) for i in range(4)]

    async def scenario(stub, channel, running):
        state = await stub.GetState(pb.StateRequest())
        call = stub.Evaluate()
        await call.write(pb.EvaluateRequest(batch=BATCH))
        await call.write(pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[m.task for m in members], batched=True)))
        together = await call.read()
        alone = []
        for member in members[2:3]:
            await call.write(pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[member.task], batched=True)))
            alone.append(await call.read())
        await call.done_writing()
        return state, together, alone

    state, together, alone = with_server(backend, scenario)
    assert state.batches_members
    results = [response.result for response in together.batch.responses]
    assert [r.member for r in results] == [0, 1, 2, 3] and all(r.timings.perturb_seconds == 0.0 for r in results)
    assert all(len(r.rewards) == len(BATCH.problems) for r in results)
    assert list(results[2].rewards) == list(alone[0].batch.responses[0].result.rewards)


def test_a_server_that_cannot_batch_refuses_a_batch_and_says_so_in_its_state():
    async def scenario(stub, channel, running):
        state = await stub.GetState(pb.StateRequest())
        call = stub.Evaluate()
        for request in _batched(_task(rank=1), _task(rank=1, member=1)):
            await call.write(request)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call.read()
        return state, raised.value

    state, error = with_server(SimulatedLatencyTestBackend(), scenario)
    assert not state.batches_members
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and "one at a time" in error.details()
