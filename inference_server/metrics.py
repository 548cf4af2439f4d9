"""Prometheus metrics of an inference server (`seedcast serve --metrics-port P`).

Names carry the `seedcast_` prefix and base units; counters end in `_total`; histogram buckets span
milliseconds (restore) to minutes (long generations). Labels are few and fixed per server
(`backend`, `model`), so dashboards can template on them without a cardinality blow-up.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# Shared with the optimizer's metrics: seconds-to-minutes work.
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
                   600.0, 1200.0)
PHASES = ("perturb", "generate", "score", "restore", "update")


class ServerMetrics:
    """The server's counters, gauges and histograms, bound to its backend and model labels."""

    def __init__(self, backend: str, model: str, registry: CollectorRegistry = REGISTRY) -> None:
        labels = {"backend": backend, "model": model}
        names = list(labels)

        def counter(name: str, help_text: str) -> Counter:
            return Counter(name, help_text, names, registry=registry).labels(**labels)

        self.members_evaluated = counter("seedcast_members_evaluated_total", "Members evaluated by this server.")
        self.members_failed = counter("seedcast_members_failed_total",
                                      "Members that failed on this server (evaluator or generation error).")
        self.tokens_generated = counter("seedcast_tokens_generated_total", "Completion tokens generated.")
        self.samples_served = counter("seedcast_sample_completions_total", "Completions generated for Sample calls.")
        self.updates_applied = counter("seedcast_updates_applied_total", "ES update steps applied.")
        self.step = Gauge("seedcast_server_step", "Update steps applied since the base model was loaded.", names,
                          registry=registry).labels(**labels)
        self.phase_seconds = {
            phase: Histogram(f"seedcast_{phase}_seconds", f"Seconds per {phase} phase.", names,
                             buckets=SECONDS_BUCKETS, registry=registry).labels(**labels)
            for phase in PHASES
        }
        self.rpc_errors = Counter("seedcast_rpc_errors_total", "RPCs answered with an error status, by method, code.",
                                  [*names, "method", "code"], registry=registry)
        self._labels = labels

    def rpc_error(self, method: str, code: str) -> None:
        """Count one error answer."""
        self.rpc_errors.labels(**self._labels, method=method, code=code).inc()


def start_metrics_server(port: int, host: str = "0.0.0.0", registry: CollectorRegistry = REGISTRY) -> int:
    """Serve /metrics on host:port in a background thread; returns the bound port."""
    server, _ = start_http_server(port, addr=host, registry=registry)
    return server.server_address[1]
