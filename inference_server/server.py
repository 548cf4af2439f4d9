"""Start, run and gracefully stop an inference server.

    seedcast serve --backend hf --model smollm2-135m-instruct --port 50051

`serve()` loads the backend, binds the port (0 picks a free one), marks the standard
`grpc.health.v1` service SERVING, and on SIGTERM/SIGINT flips it to NOT_SERVING before stopping with
a grace period, so load balancers drain it first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY, CollectorRegistry

from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.backends.base import Backend
from seedcast.inference_server.metrics import start_metrics_server
from seedcast.inference_server.security import ServerSecurity, TokenAuthInterceptor
from seedcast.inference_server.servicer import InferenceServicer
from seedcast.inference_server.validation import Limits
from seedcast.proto import seedcast_pb2_grpc as pb_grpc

log = logging.getLogger("seedcast.server")
SERVICE_NAME = "seedcast.v1.InferenceServer"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # Members can take minutes; keepalive pings keep idle streams through NATs without flooding.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


@dataclass
class ServeOptions:
    """How to run one server (the flags of `seedcast serve`)."""

    backend: str = "hf"
    model: str = "smollm2-135m-instruct"
    host: str = "127.0.0.1"
    port: int = 50051
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None
    pair_cache: bool = False
    noise: str = "gaussian"
    cpu_cores: str | None = None
    kv_cache_gib: float = 1.0
    gpu_memory_utilization: float | None = None
    ready_file: str | None = None
    metrics_port: int | None = None
    grace_seconds: float = 5.0
    limits: Limits = field(default_factory=Limits)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    token_file: str | None = None
    insecure: bool = False
    max_concurrent_rpcs: int = 64
    allowed_evaluators: tuple[str, ...] = ()


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


async def start_server(backend: Backend, host: str = "127.0.0.1", port: int = 0, limits: Limits | None = None,
                       registry: CollectorRegistry | None = None, security: ServerSecurity | None = None,
                       max_concurrent_rpcs: int = 64) -> RunningServer:
    """Serve `backend` on host:port (0 = a free port) and return once it accepts calls.

    Metrics go to `registry` (a private one when None; `serve()` passes the process-wide one).
    Calls beyond `max_concurrent_rpcs` are answered RESOURCE_EXHAUSTED instead of queueing unboundedly.
    Without `limits`, any evaluator spec is allowed (in-process use); `seedcast serve` allows only
    built-ins, installed plugins and its --allow-evaluator specs.
    """
    limits = limits or Limits(allowed_evaluators=None)
    security = security or ServerSecurity()
    servicer = InferenceServicer(backend, limits, registry)
    interceptors = []
    if security.token:
        interceptors.append(TokenAuthInterceptor(
            security.token, on_reject=lambda method: servicer.metrics.rpc_error(method, "UNAUTHENTICATED")))
    server = grpc.aio.server(options=GRPC_OPTIONS, interceptors=interceptors,
                             maximum_concurrent_rpcs=max_concurrent_rpcs)
    pb_grpc.add_InferenceServerServicer_to_server(servicer, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    credentials = security.credentials()
    address = f"{host}:{port}"
    bound = server.add_secure_port(address, credentials) if credentials else server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot bind {host}:{port}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, servicer, health_servicer, bound)


def _write_ready_file(path: str, port: int) -> None:
    target = Path(path)
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps({"port": port, "pid": os.getpid()}))
    temporary.replace(target)  # atomic: a reader never sees half a file


async def serve(options: ServeOptions) -> None:
    """Load the backend, serve until SIGTERM/SIGINT, then shut down gracefully."""
    # Checked before the (slow) model load, so a bad flag fails at once.
    security = ServerSecurity.from_files(options.tls_cert, options.tls_key, options.tls_ca, options.token_file,
                                         options.host, options.insecure)
    log.info("loading %s backend with model %s", options.backend, options.model)
    extra = {"pair_cache": True} if options.pair_cache else {}
    if options.backend == "vllm":
        extra.update(cpu_cores=options.cpu_cores, kv_cache_gib=options.kv_cache_gib,
                     gpu_memory_utilization=options.gpu_memory_utilization)
    elif options.cpu_cores or options.gpu_memory_utilization is not None:
        raise SystemExit("error: --cpu-cores and --gpu-memory-utilization apply to --backend vllm only")
    backend = create_backend(options.backend, options.model, device=options.device, dtype=options.dtype,
                             threads=options.threads, noise=options.noise, **extra)
    limits = replace(options.limits, allowed_evaluators=options.allowed_evaluators)
    running = await start_server(backend, options.host, options.port, limits, REGISTRY, security,
                                 options.max_concurrent_rpcs)
    if options.metrics_port is not None:
        bound = start_metrics_server(options.metrics_port, options.host)
        log.info("metrics on http://%s:%d/metrics", options.host, bound)
    info = backend.info()
    log.info("serving %s (%s, %s, %s params) on %s:%d (%s%s), fingerprint %s", info.model, info.device, info.dtype,
             f"{info.parameters:,}", options.host, running.port,
             "mutual TLS" if security.client_ca else "TLS" if security.certificate else "plaintext",
             ", bearer token required" if security.token else "", running.servicer.fingerprint)
    if options.ready_file:
        _write_ready_file(options.ready_file, running.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    log.info("shutting down (grace %.1f s)", options.grace_seconds)
    await running.stop(options.grace_seconds)
