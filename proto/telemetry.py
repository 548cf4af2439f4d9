"""Conventions both processes' Prometheus metrics share: the name scheme, histogram buckets, the
phases of a member, and the /metrics endpoint.

Names: `seedcast_server_*` on inference servers, `seedcast_optimizer_*` on the optimizer; base
units in the name (`_seconds`, `_bytes`), counters end in `_total`. The phases are the fields of
the wire's `Timings` message (tests/proto/test_telemetry.py checks that they agree).
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from seedcast.proto.errors import PortUnavailableError

SERVER_PREFIX = "seedcast_server_"
OPTIMIZER_PREFIX = "seedcast_optimizer_"
# Seconds-to-minutes work: restores take milliseconds, long generations and iterations minutes.
SECONDS_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    20.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1200.0,
)
# What a server does for one member, in order; each is a `<phase>_seconds` field of `Timings`.
MEMBER_PHASES = ("perturb", "generate", "score", "restore")
# Everything a server times: the member phases and applying an update step.
SERVER_PHASES = (*MEMBER_PHASES, "update")


def phase_field(phase: str) -> str:
    """The `Timings` field (and metrics.jsonl key) of a phase: `perturb` -> `perturb_seconds`."""
    return f"{phase}_seconds"


def start_metrics_server(
    port: int, host: str = "0.0.0.0", registry: CollectorRegistry = REGISTRY, setting: str = "the metrics port"
) -> int:
    """Serve /metrics on host:port in a background thread; returns the bound port. A port that is taken is a
    PortUnavailableError naming it and the `setting` that chose it."""
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError:
        raise PortUnavailableError(host, port, "Prometheus metrics", setting) from None
    return server.server_address[1]
