"""One ES iteration's row of metrics.jsonl, from its member reports: raw rewards (unshaped), failures, member
phase timings, throughput and the fleet's state after the step."""

from __future__ import annotations

import math
import statistics

from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.fleet.shards import MemberReport
from seedcast.optimizer.run_records import IterationRecord
from seedcast.proto.telemetry import MEMBER_PHASES


def summarize_iteration(
    *,
    iteration: int,
    step: ESStep,
    seconds: float,
    reports: dict[int, MemberReport],
    tokens: int,
    reassigned: int,
    dropped: int,
    servers_active: int,
    fingerprint: str,
    answers_per_member: int,
) -> IterationRecord:
    """The IterationRecord of iteration `iteration`, which ended with `step` and the fleet at `fingerprint`;
    every member that answered gave `answers_per_member` completions (prompts x samples per prompt)."""
    rewards = [r.fitness for r in reports.values() if not math.isnan(r.fitness)]  # raw mean rewards, unshaped
    phases = {}
    for phase in MEMBER_PHASES:
        values = [r.timings[phase] for r in reports.values() if r.timings]
        phases[phase] = statistics.fmean(values) if values else None
    return IterationRecord(
        iteration=iteration,
        step=step.step,
        seconds=seconds,
        reward_mean=statistics.fmean(rewards) if rewards else None,
        reward_std=statistics.pstdev(rewards) if rewards else None,
        reward_max=max(rewards, default=None),
        reward_min=min(rewards, default=None),
        members_ok=len(rewards),
        members_failed=sum(1 for r in reports.values() if r.error),
        members_reassigned=reassigned,
        members_dropped=dropped,
        servers_active=servers_active,
        completions=answers_per_member * sum(1 for r in reports.values() if not r.error),
        completion_tokens=tokens,
        truncated_answers=sum(r.truncated for r in reports.values()),
        tokens_per_second=tokens / seconds if seconds else 0.0,
        update_terms=len(step.terms),
        fingerprint=fingerprint,
        phase_seconds=phases,
    )
