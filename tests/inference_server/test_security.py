"""TLS, mutual TLS and the bearer token: wrong or missing credentials are refused, weights untouched."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seedcast.cli import main
from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.security import ServerSecurity
from seedcast.inference_server.server import start_server
from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.fleet.client import ClientSecurity, ServerClient
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.transport import SecurityConfigError
from tests.certificates import TestCA

TOKEN = "correct-horse-battery-staple-0123"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca, rogue = TestCA(directory, "seedcast-ca"), TestCA(directory, "rogue-ca")
    token_file = directory / "token"
    token_file.write_text(TOKEN + "\n")
    wrong_token = directory / "wrong-token"
    wrong_token.write_text("not-the-right-token-at-all\n")
    return {
        "ca": ca,
        "server": ca.issue("server", server=True),
        "client": ca.issue("client", server=False),
        "rogue_client": rogue.issue("rogue-client", server=False),
        "token": token_file,
        "wrong_token": wrong_token,
    }


def _server_security(pki) -> ServerSecurity:
    return ServerSecurity.from_files(
        str(pki["server"].cert),
        str(pki["server"].key),
        str(pki["ca"].files.cert),
        str(pki["token"]),
        "127.0.0.1",
        insecure=False,
    )


def _client(pki, port, *, client="client", token="token", tls=True) -> ServerClient:
    if not tls:
        return ServerClient(f"127.0.0.1:{port}", ClientSecurity.from_files(token_file=str(pki[token])))
    issued = pki[client] if client else None
    security = ClientSecurity.from_files(
        str(pki["ca"].files.cert),
        str(issued.cert) if issued else None,
        str(issued.key) if issued else None,
        None,
        str(pki[token]) if token else None,
    )
    return ServerClient(f"127.0.0.1:{port}", security)


def _with_secure_server(pki, scenario):
    backend = SimulatedLatencyTestBackend(0.001)

    async def main():
        running = await start_server(backend, "127.0.0.1", 0, security=_server_security(pki))
        try:
            return await scenario(running.port, backend)
        finally:
            await running.stop(0)

    return asyncio.run(main())


async def _update(client: ServerClient) -> pb.UpdateReply:
    try:
        return await client.apply_update(ESStep(step=1, sigma=0.1, terms=[(5, 0.5)]))
    finally:
        await client.close()


def test_right_certificate_and_token_work(pki):
    async def scenario(port, backend):
        return await _update(_client(pki, port)), backend.fingerprint()

    reply, fingerprint = _with_secure_server(pki, scenario)
    assert reply.step == 1 and reply.weights_fingerprint == fingerprint


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ({"token": None}, grpc.StatusCode.UNAUTHENTICATED),
        ({"token": "wrong_token"}, grpc.StatusCode.UNAUTHENTICATED),
        ({"client": "rogue_client"}, grpc.StatusCode.UNAVAILABLE),  # handshake refused: unknown client CA
        ({"client": None}, grpc.StatusCode.UNAVAILABLE),  # handshake refused: no client certificate
        ({"tls": False}, grpc.StatusCode.UNAVAILABLE),  # plaintext against a TLS port
    ],
)
def test_wrong_credentials_are_refused_and_weights_unchanged(pki, kind, expected):
    async def scenario(port, backend):
        before = backend.fingerprint()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await _update(_client(pki, port, **kind))
        return raised.value.code(), before, backend.fingerprint()

    code, before, after = _with_secure_server(pki, scenario)
    assert code == expected
    assert before == after


def test_evaluate_stream_needs_the_token(pki):
    async def scenario(port, backend):
        client = _client(pki, port, token=None)
        stream = client.evaluate_stream()
        # The refusal may arrive before the write completes or only at the read: either raises it.
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stream.write(
                pb.EvaluateRequest(batch=pb.PromptBatch(problems=[pb.Problem(prompt="p")], evaluator="synthetic"))
            )
            await stream.read()
        await client.close()
        return raised.value.code()

    assert _with_secure_server(pki, scenario) == grpc.StatusCode.UNAUTHENTICATED


def test_health_needs_no_token_but_tls(pki):
    async def scenario(port, backend):
        client = _client(pki, port, token=None)
        answer = await health_pb2_grpc.HealthStub(client.channel).Check(health_pb2.HealthCheckRequest())
        await client.close()
        return answer.status

    assert _with_secure_server(pki, scenario) == health_pb2.HealthCheckResponse.SERVING


def test_token_never_reaches_logs(pki, caplog):
    caplog.set_level(logging.DEBUG)

    async def scenario(port, backend):
        await _update(_client(pki, port))
        with pytest.raises(grpc.aio.AioRpcError):
            await _update(_client(pki, port, token="wrong_token"))

    _with_secure_server(pki, scenario)
    assert TOKEN not in caplog.text and "not-the-right-token" not in caplog.text


def test_server_security_settings_are_checked(pki, tmp_path):
    with pytest.raises(SecurityConfigError, match="refusing plaintext gRPC on 0.0.0.0"):
        ServerSecurity.from_files(None, None, None, None, "0.0.0.0", insecure=False)
    assert ServerSecurity.from_files(None, None, None, None, "0.0.0.0", insecure=True).credentials() is None
    assert ServerSecurity.from_files(None, None, None, None, "127.0.0.1", insecure=False).credentials() is None
    with pytest.raises(SecurityConfigError, match="go together"):
        ServerSecurity.from_files(str(pki["server"].cert), None, None, None, "0.0.0.0", insecure=False)
    with pytest.raises(SecurityConfigError, match="needs TLS"):
        ServerSecurity.from_files(None, None, str(pki["ca"].files.cert), None, "127.0.0.1", insecure=False)
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(SecurityConfigError, match="shorter than 16"):
        ServerSecurity.from_files(None, None, None, str(short), "127.0.0.1", insecure=False)
    with pytest.raises(SecurityConfigError, match="cannot read"):
        ServerSecurity.from_files(None, None, None, str(tmp_path / "missing"), "127.0.0.1", insecure=False)


def test_fleet_config_refuses_plaintext_to_remote_servers(tmp_path):
    from seedcast.optimizer.config import ConfigError
    from seedcast.optimizer.config_files import load_config

    with pytest.raises(ConfigError, match="not on loopback"):
        load_config(overrides=["fleet.servers=[10.1.2.3:50051]", "fleet.local=0"])
    assert load_config(overrides=["fleet.servers=[10.1.2.3:50051]", "fleet.local=0", "fleet.insecure=true"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(overrides=[f"fleet.token_file={tmp_path / 'nope'}"])


def test_bad_tls_files_are_named_before_the_model_loads(pki, tmp_path, capsys):
    server = pki["server"]
    damaged_ca = tmp_path / "damaged-ca.pem"  # the CA's PEM frame around a body cut short
    lines = pki["ca"].files.cert.read_text().splitlines()
    damaged_ca.write_text("\n".join([lines[0], *lines[1:4], lines[-1]]) + "\n")
    cases = [
        ((server.cert, server.cert, None), "--tls-key .* holds no PEM private key"),  # the certificate as key
        ((server.key, server.key, None), "--tls-cert .* holds no PEM certificate"),
        ((server.cert, pki["client"].key, None), "not the private key of --tls-cert"),  # another pair's key
        ((server.cert, server.key, server.key), "--tls-ca .* holds no PEM certificate"),
        ((server.cert, server.key, damaged_ca), "gRPC refuses --tls-ca .*: its certificates are damaged"),
    ]
    for (cert, key, ca), message in cases:
        with pytest.raises(SecurityConfigError, match=message):
            ServerSecurity.from_files(str(cert), str(key), ca and str(ca), None, "127.0.0.1", insecure=False)
    # Through the CLI: a one-line error, exit 2, and no model was loaded (the model path does not even exist).
    argv = [
        "serve",
        "--model",
        str(tmp_path / "no-model"),
        "--tls-cert",
        str(server.cert),
        "--tls-key",
        str(server.cert),
        "--port",
        "0",
    ]
    assert main(argv) == 2
    assert "holds no PEM private key" in capsys.readouterr().err


def test_unauthenticated_health_streams_cannot_lock_out_the_probes_or_the_work(tmp_path, tiny_model_dir, pki):
    import asyncio

    from seedcast.optimizer.config_files import load_config
    from seedcast.optimizer.run_dir import RunDirectory
    from seedcast.optimizer.trainer import Trainer
    from tests.server_processes import ServerProcess

    server = ServerProcess(tiny_model_dir, tmp_path, "guarded", ("--token-file", str(pki["token"])))
    server.start()
    channel = grpc.insecure_channel(server.address)
    health = health_pb2_grpc.HealthStub(channel)
    try:
        watches = [health.Watch(health_pb2.HealthCheckRequest()) for _ in range(100)]  # > 64, no token
        opened = sum(1 for w in watches if _first_or_refused(w) == "SERVING")
        assert 1 <= opened < 100  # some streams hold a place; the rest are refused, not queued
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        overrides = [
            f"model.name={tiny_model_dir}",
            "iterations=2",
            "batch_size=2",
            "eval_every=0",
            "task.evaluator=tests.tiny_model:digit_fraction_reward",
            "sampling.max_new_tokens=4",
            "es.population=4",
            "es.sigma=0.05",
            "fleet.local=0",
            f"fleet.servers=[{server.address}]",
            f"fleet.token_file={pki['token']}",
        ]
        config = load_config(overrides=overrides)
        result = asyncio.run(
            Trainer(config, RunDirectory.create(tmp_path / "run", config), show_progress=False).train()
        )
        assert result.iterations == 2  # the work went on with the health streams still open
        for watch in watches:
            watch.cancel()
    finally:
        channel.close()
        server.stop()


def _first_or_refused(stream) -> str:
    try:
        return health_pb2.HealthCheckResponse.ServingStatus.Name(next(stream).status)
    except grpc.RpcError as error:
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
        return "refused"


def test_an_unauthenticated_call_is_refused_without_reading_its_request():
    import types

    from seedcast.inference_server.security import TokenAuthInterceptor
    from seedcast.proto import seedcast_pb2_grpc as pb_grpc

    class Recorder:  # collects the method handlers the generated code registers
        def add_generic_rpc_handlers(self, handlers):
            self.handlers = handlers

        def add_registered_method_handlers(self, service, methods):
            self.methods = methods

    server = Recorder()
    pb_grpc.add_InferenceServerServicer_to_server(pb_grpc.InferenceServerServicer(), server)
    interceptor = TokenAuthInterceptor("a-long-enough-token-1234")
    for name, handler in server.methods.items():

        async def continuation(details, handler=handler):
            return handler

        details = types.SimpleNamespace(method=f"/seedcast.v1.InferenceServer/{name}", invocation_metadata=())
        denied = asyncio.run(interceptor.intercept_service(continuation, details))
        # Request-streaming and never iterated: flow control keeps the body out of the server's memory.
        assert denied.request_streaming and denied.response_streaming == handler.response_streaming, name


def test_a_health_watch_stream_ends_after_its_time_and_gives_its_place_back():
    import asyncio

    from grpc_health.v1 import health

    from seedcast.inference_server.admission import AdmissionInterceptor

    async def scenario():
        server = grpc.aio.server(interceptors=[AdmissionInterceptor(64, max_health_watches=2, max_watch_seconds=0.5)])
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                for _ in range(3):  # more rounds than places: each round's streams end and free theirs
                    streams = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(2)]
                    for stream in streams:
                        replies = []
                        async for reply in stream:
                            replies.append(reply.status)
                        assert replies == [health_pb2.HealthCheckResponse.SERVING]
                        assert await stream.code() == grpc.StatusCode.OK
        finally:
            await server.stop(0)

    asyncio.run(asyncio.wait_for(scenario(), 30))
