"""The optimizer's handle on one inference server: unary calls and the long-lived Evaluate stream."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import grpc

from seedcast.optimizer.es.step import ESStep
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.errors import SeedcastError
from seedcast.proto.transport import AUTH_HEADER, GRPC_OPTIONS, bearer, read_secret, read_token

if TYPE_CHECKING:
    from seedcast.optimizer.config import FleetConfig


class ServerUnreachableError(SeedcastError, ConnectionError):
    """A server did not answer; the message names its address."""


@dataclass(frozen=True)
class ClientSecurity:
    """How the optimizer authenticates servers (TLS) and itself (client certificate, bearer token)."""

    root_certificates: bytes | None = None
    private_key: bytes | None = None
    certificate_chain: bytes | None = None
    server_name: str | None = None
    token: str | None = None

    @classmethod
    def from_files(
        cls,
        ca: str | None = None,
        cert: str | None = None,
        key: str | None = None,
        server_name: str | None = None,
        token_file: str | None = None,
    ) -> ClientSecurity:
        """Read the PEM files and the token file named by the fleet config."""
        return cls(
            read_secret(ca, "TLS CA"),
            read_secret(key, "TLS client key"),
            read_secret(cert, "TLS client certificate"),
            server_name,
            read_token(token_file),
        )

    @classmethod
    def of_fleet(cls, fleet: FleetConfig) -> ClientSecurity:
        """What the run's fleet section names: its CA, client certificate and key, server name and token file."""
        return cls.from_files(
            ca=fleet.tls_ca,
            cert=fleet.tls_cert,
            key=fleet.tls_key,
            server_name=fleet.tls_server_name,
            token_file=fleet.token_file,
        )

    def plaintext(self) -> ClientSecurity:
        """The same token without TLS: for the servers this optimizer starts itself on loopback."""
        return replace(self, root_certificates=None, private_key=None, certificate_chain=None, server_name=None)

    def channel(self, address: str) -> grpc.aio.Channel:
        """A TLS channel when a CA is set, else plaintext."""
        if self.root_certificates is None:
            return grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
        credentials = grpc.ssl_channel_credentials(self.root_certificates, self.private_key, self.certificate_chain)
        options = list(GRPC_OPTIONS)
        if self.server_name:
            options.append(("grpc.ssl_target_name_override", self.server_name))
        return grpc.aio.secure_channel(address, credentials, options=options)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Call metadata carrying the bearer token, if any."""
        return ((AUTH_HEADER, bearer(self.token)),) if self.token else ()


class ServerClient:
    """A channel to one server at `address` (host:port)."""

    def __init__(self, address: str, security: ClientSecurity | None = None) -> None:
        self.address = address
        self.security = security or ClientSecurity()
        self.metadata = self.security.metadata()
        self.channel = self.security.channel(address)
        self.stub = pb_grpc.InferenceServerStub(self.channel)
        self.stream: grpc.aio.StreamStreamCall | None = None
        self.batch_iteration: int | None = None  # the iteration whose batch this stream holds

    async def wait_ready(self, timeout_seconds: float, evaluator: str = "") -> pb.ServerState:
        """Wait until the server answers GetState, or raise ServerUnreachableError naming the address. With
        `evaluator`, the server also says whether it can build that evaluator (`evaluator_problem`)."""
        try:
            await asyncio.wait_for(self.channel.channel_ready(), timeout_seconds)
            request = pb.StateRequest(evaluator=evaluator)
            return await self.stub.GetState(request, timeout=timeout_seconds, metadata=self.metadata)
        except (asyncio.TimeoutError, grpc.aio.AioRpcError) as error:
            detail = (
                error.details() if isinstance(error, grpc.aio.AioRpcError) else f"no answer in {timeout_seconds:g} s"
            )
            raise ServerUnreachableError(
                f"cannot reach inference server at {self.address}: {detail}; "
                "check that `seedcast serve` runs there and the port is open"
            ) from None

    async def state(self) -> pb.ServerState:
        """The server's step, fingerprint and model."""
        return await self.stub.GetState(pb.StateRequest(), metadata=self.metadata)

    async def apply_update(self, step: ESStep) -> pb.UpdateReply:
        """Send one update step."""
        return await self.stub.ApplyUpdate(step.to_request(), metadata=self.metadata)

    async def sync(self, steps: list[ESStep]) -> pb.UpdateReply:
        """Replay logged steps in one Sync call."""
        return await self.stub.Sync(iter([step.to_request() for step in steps]), metadata=self.metadata)

    async def sample(self, request: pb.SampleRequest) -> pb.SampleReply:
        """Scored samples on the current weights."""
        return await self.stub.Sample(request, metadata=self.metadata)

    def evaluate_stream(self) -> grpc.aio.StreamStreamCall:
        """The open Evaluate stream, opened on first use."""
        if self.stream is None:
            self.stream = self.stub.Evaluate(metadata=self.metadata)
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
        if self.stream is not None and not self.stream.done():
            await self.stream.done_writing()
        self.drop_stream()
        await self.channel.close()
