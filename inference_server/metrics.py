"""Prometheus metrics of an inference server (`seedcast serve --metrics-port P`).

Names follow proto/telemetry.py: `seedcast_server_*`, base units, counters ending in `_total`.
Labels are few and fixed per server (`backend`, `model`), so dashboards can template on them without
a cardinality blow-up.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from seedcast.proto.telemetry import SECONDS_BUCKETS, SERVER_PHASES, SERVER_PREFIX


class ServerMetrics:
    """The server's counters, gauges and histograms, bound to its backend and model labels."""

    def __init__(self, backend: str, model: str, registry: CollectorRegistry = REGISTRY) -> None:
        labels = {"backend": backend, "model": model}
        names = list(labels)

        def counter(name: str, help_text: str) -> Counter:
            return Counter(SERVER_PREFIX + name, help_text, names, registry=registry).labels(**labels)

        self.members_evaluated = counter("members_evaluated_total", "Members evaluated by this server.")
        self.members_failed = counter(
            "members_failed_total", "Members that failed on this server (evaluator or generation error)."
        )
        self.tokens_generated = counter("tokens_generated_total", "Completion tokens generated.")
        self.samples_served = counter("sample_completions_total", "Completions generated for Sample calls.")
        self.updates_applied = counter("updates_applied_total", "ES update steps applied.")
        self.step = Gauge(
            SERVER_PREFIX + "step", "Update steps applied since the base model was loaded.", names, registry=registry
        ).labels(**labels)
        self.phase_seconds = {
            phase: Histogram(
                f"{SERVER_PREFIX}{phase}_seconds",
                f"Seconds per {phase} phase.",
                names,
                buckets=SECONDS_BUCKETS,
                registry=registry,
            ).labels(**labels)
            for phase in SERVER_PHASES
        }
        self.rpc_errors = Counter(
            SERVER_PREFIX + "rpc_errors_total",
            "RPCs answered with an error status, by method, code.",
            [*names, "method", "code"],
            registry=registry,
        )
        self._labels = labels

    def rpc_error(self, method: str, code: str) -> None:
        """Count one error answer."""
        self.rpc_errors.labels(**self._labels, method=method, code=code).inc()
