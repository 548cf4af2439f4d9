"""Prometheus metrics of the optimizer (`seedcast train --metrics-port P`).

Names follow proto/telemetry.py: `seedcast_optimizer_*`. Iteration-level numbers (reward statistics,
step, servers up) come from the iteration's record (`observe_iteration`); member-level counters
and fleet events are counted as they happen. Labels: `task` and `model` only.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from seedcast.optimizer.run_dir import IterationRecord
from seedcast.proto.telemetry import OPTIMIZER_PREFIX, SECONDS_BUCKETS


class OptimizerMetrics:
    """The optimizer's metrics for one run."""

    def __init__(self, task: str, model: str, registry: CollectorRegistry = REGISTRY) -> None:
        labels = {"task": task, "model": model}
        names = list(labels)

        def gauge(name: str, help_text: str) -> Gauge:
            return Gauge(OPTIMIZER_PREFIX + name, help_text, names, registry=registry).labels(**labels)

        def counter(name: str, help_text: str) -> Counter:
            return Counter(OPTIMIZER_PREFIX + name, help_text, names, registry=registry).labels(**labels)

        self.iteration_seconds = Histogram(
            OPTIMIZER_PREFIX + "iteration_seconds",
            "Wall seconds per ES iteration.",
            names,
            buckets=SECONDS_BUCKETS,
            registry=registry,
        ).labels(**labels)
        self.reward_mean = gauge("reward_mean", "Mean member fitness of the last iteration.")
        self.reward_std = gauge("reward_std", "Standard deviation of member fitness, last iteration.")
        self.reward_max = gauge("reward_max", "Best member fitness of the last iteration.")
        self.eval_reward = gauge("eval_reward", "Greedy reward of the unperturbed weights on the eval set.")
        self.step = gauge("step", "Update steps applied (logged and broadcast).")
        self.servers_up = gauge("servers_up", "Servers in the fleet that answer.")
        self.members_evaluated = counter("members_evaluated_total", "Member results received.")
        self.members_failed = counter("members_failed_total", "Members reported as failed.")
        self.members_reassigned = counter(
            "members_reassigned_total", "Members handed to another server after their server failed."
        )
        self.members_dropped = counter(
            "members_dropped_total",
            "Member results abandoned: stalled past the deadline, or in flight when a quorum closed the iteration.",
        )
        self.servers_fenced = counter(
            "servers_fenced_total", "Servers excluded because their weights disagreed with the fleet's."
        )
        self.servers_rejoined = counter(
            "servers_rejoined_total", "Servers readmitted after a Sync proved their weights."
        )
        self.tokens = counter("tokens_total", "Completion tokens reported by member results.")
        self.truncated_answers = counter(
            "truncated_answers_total", "Member answers that stopped at sampling.max_new_tokens before ending."
        )
        self.fingerprint_mismatches = counter(
            "fingerprint_mismatches_total", "Times the servers disagreed on the weights fingerprint."
        )

    def observe_iteration(self, record: IterationRecord) -> None:
        """Export the iteration-level numbers of one finished iteration (the row metrics.jsonl gets too)."""
        self.iteration_seconds.observe(record.seconds)
        self.step.set(record.step)
        self.members_reassigned.inc(record.members_reassigned)
        self.members_dropped.inc(record.members_dropped)
        for gauge, value in (
            (self.reward_mean, record.reward_mean),
            (self.reward_std, record.reward_std),
            (self.reward_max, record.reward_max),
            (self.eval_reward, record.eval_reward),
        ):
            if value is not None:
                gauge.set(value)
