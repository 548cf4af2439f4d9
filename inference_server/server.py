"""Start, run and gracefully stop an inference server.

    seedcast serve --backend hf --model smollm2-135m-instruct --port 50051
    python -m seedcast.inference_server --backend hf ...   # the same, without the optimizer's CLI

Its options are `ServeConfig` (serve_config.py).

`serve()` loads the backend, binds the port (0 picks a free one), marks the standard
`grpc.health.v1` service SERVING, and on SIGTERM/SIGINT flips it to NOT_SERVING before stopping with
a grace period, so load balancers drain it first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY, CollectorRegistry

from seedcast.inference_server.admission import AdmissionInterceptor
from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.backends.base import Backend
from seedcast.inference_server.security import ServerSecurity, TokenAuthInterceptor
from seedcast.inference_server.serve_config import ServeConfig, ServeConfigError, serve_config_from_args
from seedcast.inference_server.servicer import InferenceServicer
from seedcast.inference_server.validation import Limits
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.errors import PortUnavailableError
from seedcast.proto.telemetry import start_metrics_server
from seedcast.proto.transport import GRPC_OPTIONS

log = logging.getLogger("seedcast.server")
SERVICE_NAME = "seedcast.v1.InferenceServer"


class RunningServer:
    """A started server: its port, servicer and the means to stop it."""

    def __init__(self, server: grpc.aio.Server, servicer: InferenceServicer, health_servicer, port: int) -> None:
        self.server = server
        self.servicer = servicer
        self.health = health_servicer
        self.port = port

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Report NOT_SERVING, then stop accepting calls and wait up to `grace_seconds` for running ones."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_seconds)
        self.servicer.close()


async def start_server(
    backend: Backend,
    host: str = "127.0.0.1",
    port: int = 0,
    limits: Limits | None = None,
    registry: CollectorRegistry | None = None,
    security: ServerSecurity | None = None,
    max_concurrent_rpcs: int = 64,
) -> RunningServer:
    """Serve `backend` on host:port (0 = a free port) and return once it accepts calls.

    Metrics go to `registry` (a private one when None; `serve()` passes the process-wide one).
    Calls beyond `max_concurrent_rpcs` are answered RESOURCE_EXHAUSTED instead of queueing unboundedly; health
    Watch streams have a budget of their own and Check none, so no caller can starve the probes or the work
    (admission.py).
    Without `limits`, any evaluator spec is allowed (in-process use); `seedcast serve` allows only
    built-ins, installed plugins and its --allow-evaluator specs.
    """
    limits = limits or Limits(allowed_evaluators=None)
    security = security or ServerSecurity()
    servicer = InferenceServicer(backend, limits, registry)
    interceptors = []
    if security.token:
        interceptors.append(
            TokenAuthInterceptor(
                security.token, on_reject=lambda method: servicer.metrics.rpc_error(method, "UNAUTHENTICATED")
            )
        )
    interceptors.append(
        AdmissionInterceptor(
            max_concurrent_rpcs, on_reject=lambda method: servicer.metrics.rpc_error(method, "RESOURCE_EXHAUSTED")
        )
    )
    # gRPC turns SO_REUSEPORT on by default: a second server on a taken port would bind it too and silently
    # share its connections. Off, a taken port is an error.
    server = grpc.aio.server(options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)], interceptors=interceptors)
    pb_grpc.add_InferenceServerServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    credentials = security.credentials()
    address = f"{host}:{port}"
    try:
        bound = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    except RuntimeError:  # grpc raises RuntimeError("Failed to bind ...")
        bound = 0
    if bound == 0:
        raise PortUnavailableError(host, port, "gRPC", "--port")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, servicer, health_servicer, bound)


def _write_ready_file(path: str, port: int) -> None:
    target = Path(path)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps({"port": port, "pid": os.getpid()}))
    temporary.replace(target)  # atomic: a reader never sees half a file


async def _stop_when_orphaned(parent_pid: int, stop: asyncio.Event, every_seconds: float = 0.5) -> None:
    """Set `stop` once `parent_pid` is no longer this process's parent (it died; the server was re-parented)."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(every_seconds)
    log.warning("parent process %d is gone; shutting down", parent_pid)
    stop.set()


async def serve(config: ServeConfig) -> None:
    """Load the backend, serve until SIGTERM/SIGINT, then shut down gracefully."""
    # Checked before the (slow) model load, so a bad flag fails at once.
    if config.parent_pid and config.parent_pid != os.getppid():
        raise ServeConfigError(
            f"--parent-pid {config.parent_pid} is not this server's parent (process {os.getppid()} is): it is set "
            "by `seedcast train --local` for the servers it starts, which stop with it; drop it to run this server "
            "on its own"
        )
    security = ServerSecurity.from_files(
        config.tls_cert, config.tls_key, config.tls_ca, config.token_file, config.host, config.insecure
    )
    _check_port_free(config.host, config.port, "gRPC", "--port")
    if config.metrics_port:
        _check_port_free(config.host, config.metrics_port, "Prometheus metrics", "--metrics-port")
    log.info("loading %s backend with model %s", config.backend, config.model)
    options = config.backend_options()
    backend = create_backend(config.backend, options.pop("model"), **options)
    limits = Limits(allowed_evaluators=tuple(config.allowed_evaluators))
    running = await start_server(
        backend, config.host, config.port, limits, REGISTRY, security, config.max_concurrent_rpcs
    )
    if config.metrics_port is not None:
        bound = start_metrics_server(config.metrics_port, config.host, setting="--metrics-port")
        log.info("metrics on http://%s:%d/metrics", config.host, bound)
    info = backend.info()
    log.info(
        "serving %s (%s, %s, %s params, %s noise) on %s:%d (%s%s), fingerprint %s",
        info.model,
        info.device,
        info.dtype,
        f"{info.parameters:,}",
        info.noise,
        config.host,
        running.port,
        "mutual TLS" if security.client_ca else "TLS" if security.certificate else "plaintext",
        ", bearer token required" if security.token else "",
        running.servicer.fingerprint,
    )
    if config.ready_file:
        _write_ready_file(config.ready_file, running.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    watchdog = asyncio.create_task(_stop_when_orphaned(config.parent_pid, stop)) if config.parent_pid else None
    await stop.wait()
    if watchdog is not None:
        watchdog.cancel()
    log.info("shutting down (grace %.1f s)", config.grace_seconds)
    await running.stop(config.grace_seconds)


def _check_port_free(host: str, port: int, what: str, setting: str) -> None:
    """Refuse a taken port before the (slow) model load; the bind itself stays the final word."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As gRPC binds: connections of a server that just stopped (TIME_WAIT) do not make the port taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            raise PortUnavailableError(host, port, what, setting) from None


def serve_from_args(args: argparse.Namespace) -> int:
    """Serve with the options `add_serve_flags` parsed (`seedcast serve`, `python -m seedcast.inference_server`)."""
    asyncio.run(serve(serve_config_from_args(args)))
    return 0
