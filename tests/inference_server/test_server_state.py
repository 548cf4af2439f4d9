"""What GetState reports about the weights a server holds."""

from __future__ import annotations

from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.proto import seedcast_pb2 as pb
from tests.inference_server.test_servicer import with_server


def test_a_server_reports_the_fingerprint_it_applied_its_latest_step_to():
    """A resumed optimizer checks a server that already holds the last logged step by this parent fingerprint,
    so it must be the same whether the step came alone or last in a Sync of several."""
    steps = [pb.UpdateRequest(step=s, terms=[pb.SeedCoefficient(seed=s, coeff=0.1)]) for s in (1, 2, 3)]

    async def one_at_a_time(stub, channel, running):
        at_zero = await stub.GetState(pb.StateRequest())
        after = [await stub.ApplyUpdate(step) for step in steps]
        return at_zero, after, await stub.GetState(pb.StateRequest())

    async def in_one_sync(stub, channel, running):
        await stub.Sync(iter(steps))
        return await stub.GetState(pb.StateRequest())

    at_zero, after, stepwise = with_server(SimulatedLatencyTestBackend(), one_at_a_time)
    synced = with_server(SimulatedLatencyTestBackend(), in_one_sync)
    assert at_zero.parent_fingerprint == ""
    assert stepwise.parent_fingerprint == after[1].weights_fingerprint != after[2].weights_fingerprint
    assert synced.parent_fingerprint == stepwise.parent_fingerprint
    assert synced.weights_fingerprint == stepwise.weights_fingerprint
