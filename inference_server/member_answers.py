"""A member's evaluation as the wire answers it: a MemberResult built from its outcome, or a MemberFailure."""

from __future__ import annotations

import numpy

from seedcast.inference_server.member import MemberOutcome
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.reward_bytes import encode_rewards
from seedcast.proto.scorable import mean_of_scorable, scorable
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field


def member_failure(task: pb.MemberTask, error: Exception) -> pb.EvaluateResponse:
    """The member failed: its error, named by type, goes back in place of a result."""
    return pb.EvaluateResponse(
        failure=pb.MemberFailure(iteration=task.iteration, member=task.member, error=f"{type(error).__name__}: {error}")
    )


def member_result(task: pb.MemberTask, outcome: MemberOutcome) -> pb.EvaluateResponse:
    """The member's rewards (the float32 values the wire carries), tokens, truncations and phase timings; the
    per-prompt lists only when the task did not ask for a summary."""
    scored = scorable(float(numpy.float32(r)) for r in outcome.rewards)
    result = pb.MemberResult(
        iteration=task.iteration,
        member=task.member,
        reward_mean=mean_of_scorable(scored),
        prompts_scored=len(scored),
        total_completion_tokens=sum(outcome.completion_tokens),
        truncated_answers=outcome.truncated,
        timings=pb.Timings(**{phase_field(phase): getattr(outcome, phase_field(phase)) for phase in MEMBER_PHASES}),
    )
    if not task.summary_only:
        result.rewards.extend(outcome.rewards)
        result.completion_tokens.extend(outcome.completion_tokens)
    if task.per_prompt_q8:
        result.prompt_rewards_q8 = encode_rewards(outcome.rewards)
    return pb.EvaluateResponse(result=result)
