"""Prometheus metrics of the optimizer (`seedcast train --metrics-port P`).

Iteration-level numbers (reward statistics, step, servers up, fingerprint mismatches) and
member-level counters as results arrive, labelled by `task` and `model` only.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from seedcast.inference_server.metrics import SECONDS_BUCKETS


class OptimizerMetrics:
    """The optimizer's metrics for one run."""

    def __init__(self, task: str, model: str, registry: CollectorRegistry = REGISTRY) -> None:
        labels = {"task": task, "model": model}
        names = list(labels)

        def gauge(name: str, help_text: str) -> Gauge:
            return Gauge(name, help_text, names, registry=registry).labels(**labels)

        def counter(name: str, help_text: str) -> Counter:
            return Counter(name, help_text, names, registry=registry).labels(**labels)

        self.iteration_seconds = Histogram("seedcast_iteration_seconds", "Wall seconds per ES iteration.", names,
                                           buckets=SECONDS_BUCKETS, registry=registry).labels(**labels)
        self.reward_mean = gauge("seedcast_reward_mean", "Mean member fitness of the last iteration.")
        self.reward_std = gauge("seedcast_reward_std", "Standard deviation of member fitness, last iteration.")
        self.reward_max = gauge("seedcast_reward_max", "Best member fitness of the last iteration.")
        self.eval_reward = gauge("seedcast_eval_reward", "Greedy reward of the unperturbed weights on the eval set.")
        self.current_step = gauge("seedcast_current_step", "Update steps applied (logged and broadcast).")
        self.servers_up = gauge("seedcast_servers_up", "Servers in the fleet that answer.")
        self.members_evaluated = counter("seedcast_optimizer_members_evaluated_total", "Member results received.")
        self.members_failed = counter("seedcast_optimizer_members_failed_total", "Members reported as failed.")
        self.members_reassigned = counter("seedcast_members_reassigned_total",
                                          "Members handed to another server after their server failed.")
        self.members_dropped = counter("seedcast_members_dropped_total",
                                       "Member results abandoned: stalled past the deadline, or in flight when a "
                                       "quorum closed the iteration.")
        self.servers_fenced = counter("seedcast_servers_fenced_total",
                                      "Servers excluded because their weights disagreed with the fleet's.")
        self.servers_rejoined = counter("seedcast_servers_rejoined_total",
                                        "Servers readmitted after a Sync proved their weights.")
        self.tokens = counter("seedcast_optimizer_tokens_total", "Completion tokens reported by member results.")
        self.fingerprint_mismatches = counter("seedcast_fingerprint_mismatches_total",
                                              "Times the servers disagreed on the weights fingerprint.")
