"""Who may talk to a server: TLS (optionally mutual) on the port, and a bearer token on every call.

    seedcast serve --host 0.0.0.0 --tls-cert server.pem --tls-key server.key \
                   [--tls-ca clients-ca.pem] --token-file token.txt

- `--tls-cert/--tls-key` serve TLS; `--tls-ca` additionally requires a client certificate signed
  by that CA (mutual TLS).
- `--token-file` requires `authorization: Bearer <token>` on every call except the standard health
  service (probes carry no token). Comparison is constant-time; the token is never logged.
- Plaintext is allowed only on a loopback address, or with an explicit `--insecure`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from seedcast.proto.transport import (
    AUTH_HEADER,
    SecurityConfigError,
    bearer,
    plaintext_allowed,
    read_secret,
    read_token,
)

HEALTH_SERVICE_PREFIX = "/grpc.health.v1.Health/"


@dataclass(frozen=True)
class ServerSecurity:
    """The TLS material and token of one server (file contents, not paths)."""

    certificate: bytes | None = None
    private_key: bytes | None = None
    client_ca: bytes | None = None
    token: str | None = None

    @classmethod
    def from_files(
        cls, cert: str | None, key: str | None, ca: str | None, token_file: str | None, host: str, insecure: bool
    ) -> ServerSecurity:
        """Load and check the files; refuses plaintext off loopback unless `insecure`."""
        if bool(cert) != bool(key):
            raise SecurityConfigError("--tls-cert and --tls-key go together: set both, or neither")
        if ca and not cert:
            raise SecurityConfigError("--tls-ca (client certificates) needs TLS: set --tls-cert and --tls-key too")
        if not cert and not plaintext_allowed(host, insecure):
            raise SecurityConfigError(
                f"refusing plaintext gRPC on {host}: set --tls-cert/--tls-key, bind a loopback "
                "address, or pass --insecure on a network you trust"
            )
        security = cls(
            read_secret(cert, "TLS certificate"),
            read_secret(key, "TLS key"),
            read_secret(ca, "client CA"),
            read_token(token_file),
        )
        if security.certificate is not None:
            security._check_tls_files(cert, key, ca)
        return security

    def _check_tls_files(self, cert: str, key: str, ca: str | None) -> None:
        """Refuse, naming the file, TLS material that gRPC would refuse only when the port is bound: after
        the model has loaded, and with a message about binding."""
        if b"-----BEGIN CERTIFICATE-----" not in self.certificate:
            raise SecurityConfigError(f"--tls-cert {cert} holds no PEM certificate (BEGIN CERTIFICATE)")
        if b"PRIVATE KEY-----" not in self.private_key:
            raise SecurityConfigError(f"--tls-key {key} holds no PEM private key (BEGIN ... PRIVATE KEY)")
        if self.client_ca is not None and b"-----BEGIN CERTIFICATE-----" not in self.client_ca:
            raise SecurityConfigError(f"--tls-ca {ca} holds no PEM certificate (BEGIN CERTIFICATE)")
        if not _binds(grpc.ssl_server_credentials([(self.private_key, self.certificate)])):
            raise SecurityConfigError(
                f"gRPC refuses the TLS pair: --tls-key {key} is not the private key of --tls-cert {cert} (or one of "
                "them is damaged)"
            )
        if not _binds(self.credentials()):  # the pair binds alone: what gRPC refuses is the client CA
            raise SecurityConfigError(f"gRPC refuses --tls-ca {ca}: its certificates are damaged or not PEM")

    def credentials(self) -> grpc.ServerCredentials | None:
        """Server credentials for add_secure_port, or None for plaintext."""
        if self.certificate is None:
            return None
        return grpc.ssl_server_credentials(
            [(self.private_key, self.certificate)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_ca is not None,
        )


def _binds(credentials: grpc.ServerCredentials) -> bool:
    """Whether gRPC accepts these credentials: a trial bind of a loopback port, released at once."""
    probe = grpc.server(ThreadPoolExecutor(max_workers=1))
    try:
        return bool(probe.add_secure_port("127.0.0.1:0", credentials))
    except RuntimeError:
        return False
    finally:
        probe.stop(None)


class TokenAuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects every call without the right bearer token with UNAUTHENTICATED (health is exempt)."""

    def __init__(self, token: str, on_reject: Callable[[str], None] = lambda method: None) -> None:
        self._expected = bearer(token).encode()
        self._on_reject = on_reject

    def _authorised(self, metadata) -> bool:
        for key, value in metadata or ():
            if key == AUTH_HEADER:
                presented = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(presented, self._expected)
        return False

    async def intercept_service(self, continuation: Callable[..., Awaitable], handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(HEALTH_SERVICE_PREFIX):
            return handler
        if self._authorised(handler_call_details.invocation_metadata):
            return handler
        self._on_reject(method.rsplit("/", 1)[-1])
        return _denying_handler(handler)


def _denying_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler that answers UNAUTHENTICATED without reading the request: request-streaming whatever the method,
    and never iterated, so gRPC's flow control stops the body at the window and an unauthenticated call never
    holds its message in memory (a dozen 58 MiB calls would otherwise cost the server over 1 GiB before each is
    refused; bench/unauthenticated_memory.py measures it). The response side keeps the method's shape."""
    message = "missing or wrong bearer token (send `authorization: Bearer <token>`)"

    async def deny_unary(request, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def deny_stream(request_or_iterator, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
        yield  # pragma: no cover - makes this an async generator, as streaming handlers are

    options = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary or handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(deny_unary, **options)
    return grpc.stream_stream_rpc_method_handler(deny_stream, **options)
