"""What the trainer does with each member result as it arrives: the progress bar (mean reward, tokens/s), the
Prometheus counters, and the caller's own callback."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

from tqdm import tqdm

from seedcast.optimizer.fleet.shards import MemberReport
from seedcast.optimizer.metrics import OptimizerMetrics


class IterationProgress:
    """Called with every MemberReport of one iteration; counts its completion tokens."""

    def __init__(
        self,
        *,
        members: int,
        description: str,
        metrics: OptimizerMetrics,
        show: bool,
        forward: Callable[[MemberReport], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self.forward = forward
        self.started = time.perf_counter()
        self.tokens = 0
        self.fitness: list[float] = []  # the returned members' mean rewards so far
        self.bar = tqdm(
            total=members, desc=description, unit="member", disable=not show, leave=True, dynamic_ncols=True
        )

    def __call__(self, report: MemberReport) -> None:
        self.tokens += report.completion_tokens
        self.metrics.tokens.inc(report.completion_tokens)
        self.metrics.truncated_answers.inc(report.truncated)
        (self.metrics.members_failed if report.error else self.metrics.members_evaluated).inc()
        if not math.isnan(report.fitness):
            self.fitness.append(report.fitness)
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix(
            reward=f"{statistics.fmean(self.fitness):.3f}" if self.fitness else "n/a",
            tok_s=f"{self.tokens / elapsed:.0f}",
            refresh=False,
        )
        self.bar.update(1)
        if self.forward is not None:
            self.forward(report)

    def close(self) -> None:
        """Close the bar (the iteration's members are all in)."""
        self.bar.close()
