"""The optimizer's handle on one inference server: unary calls and the long-lived Evaluate stream."""

from __future__ import annotations

import asyncio

import grpc

from seedcast.inference_server.server import GRPC_OPTIONS
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc


class ServerUnreachableError(ConnectionError):
    """A server did not answer; the message names its address."""


class ServerClient:
    """A channel to one server at `address` (host:port)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
        self.stub = pb_grpc.InferenceServerStub(self.channel)
        self.stream: grpc.aio.StreamStreamCall | None = None
        self.batch_iteration: int | None = None  # the iteration whose batch this stream holds

    async def wait_ready(self, timeout_seconds: float) -> pb.ServerState:
        """Wait until the server answers GetState, or raise ServerUnreachableError naming the address."""
        try:
            await asyncio.wait_for(self.channel.channel_ready(), timeout_seconds)
            return await self.stub.GetState(pb.StateRequest(), timeout=timeout_seconds)
        except (asyncio.TimeoutError, grpc.aio.AioRpcError) as error:
            detail = (error.details() if isinstance(error, grpc.aio.AioRpcError)
                      else f"no answer in {timeout_seconds:g} s")
            raise ServerUnreachableError(f"cannot reach inference server at {self.address}: {detail}; "
                                         "check that `seedcast serve` runs there and the port is open") from None

    async def state(self) -> pb.ServerState:
        """The server's step, fingerprint and model."""
        return await self.stub.GetState(pb.StateRequest())

    async def apply_update(self, step: int, terms: list[tuple[int, float]], sigma: float) -> pb.UpdateReply:
        """Send one update step."""
        request = pb.UpdateRequest(step=step, sigma=sigma,
                                   terms=[pb.SeedCoefficient(seed=seed, coeff=coeff) for seed, coeff in terms])
        return await self.stub.ApplyUpdate(request)

    async def sample(self, request: pb.SampleRequest) -> pb.SampleReply:
        """Scored samples on the current weights."""
        return await self.stub.Sample(request)

    def evaluate_stream(self) -> grpc.aio.StreamStreamCall:
        """The open Evaluate stream, opened on first use."""
        if self.stream is None:
            self.stream = self.stub.Evaluate()
            self.batch_iteration = None
        return self.stream

    def drop_stream(self) -> None:
        """Cancel the Evaluate stream after an error; the next use opens a new one."""
        if self.stream is not None:
            self.stream.cancel()
        self.stream = None
        self.batch_iteration = None

    async def close(self) -> None:
        """Close the stream and the channel."""
        if self.stream is not None:
            await self.stream.done_writing() if not self.stream.done() else None
        self.drop_stream()
        await self.channel.close()
