"""Stop a run that cannot learn, loudly: iterations in a row in which every member failed (an evaluator that
raises, rewards outside [0, 1]) or no update was applied (every member scored the same mean reward), beyond
`stop_after_idle_iterations`. Without it such a run would end "finished" with exit 0 and an unchanged model."""

from __future__ import annotations

from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.fleet.shards import MemberReport
from seedcast.proto.errors import SeedcastError


class RunNotLearningError(SeedcastError, RuntimeError):
    """Iterations in a row without an update; the message gives the reason and what to change."""


class LearningGuard:
    """Counts idle iterations in a row (all members failed, or an empty step) and says when to stop."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: never stop
        self.in_a_row = 0
        self.failed_members = 0
        self.idle_iterations = 0

    def observe(self, reports: dict[int, MemberReport], step: ESStep) -> str | None:
        """The reason to stop after this iteration, or None to go on."""
        errors = [report.error for report in reports.values() if report.error]
        self.failed_members += len(errors)
        if errors and len(errors) == len(reports):
            reason = f"every member failed; the first error: {errors[0]}"
        elif not step.terms:
            reason = (
                "no update was applied: every member scored the same mean reward, so their differences, which ES "
                "steps along, were all zero; raise es.sigma or sampling.temperature, or choose a task the model "
                "sometimes solves"
            )
        else:
            self.in_a_row = 0
            return None
        self.idle_iterations += 1
        self.in_a_row += 1
        if self.limit and self.in_a_row >= self.limit:
            return f"stopping after {self.in_a_row} iterations in a row in which {reason}"
        return None
