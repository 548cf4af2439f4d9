"""A run that cannot learn stops loudly (exit 2, the reason, a run that resumes) instead of "finishing"."""

from __future__ import annotations

import json

import pytest

from seedcast.cli import main
from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.fleet.shards import MemberReport
from seedcast.optimizer.learning_guard import LearningGuard
from seedcast.optimizer.run_dir import RunDirectory
from tests.optimizer.test_end_to_end import _overrides


def _report(index: int, error: str | None = None) -> MemberReport:
    return MemberReport(member=None, server="s:1", rewards=[0.5], error=error)  # type: ignore[arg-type]


def test_the_guard_counts_idle_iterations_in_a_row_only():
    guard = LearningGuard(limit=2)
    moving = ESStep(step=1, sigma=0.1, terms=[(1, 0.1)])
    idle = ESStep(step=2, sigma=0.1, terms=[])
    assert guard.observe({0: _report(0, "boom"), 1: _report(1, "boom")}, idle) is None
    assert guard.observe({0: _report(0), 1: _report(1)}, moving) is None  # learning again: the count restarts
    assert guard.observe({0: _report(0), 1: _report(1)}, idle) is None
    reason = guard.observe({0: _report(0, "boom"), 1: _report(1, "boom")}, idle)
    assert reason and "2 iterations in a row" in reason and "every member failed; the first error: boom" in reason
    assert (guard.failed_members, guard.idle_iterations) == (4, 3)
    assert all(LearningGuard(limit=0).observe({0: _report(0, "x")}, idle) is None for _ in range(5))


@pytest.mark.parametrize(
    ("evaluator", "reason"),
    [
        ("tests.tiny_model:failing_reward", "every member failed; the first error: RuntimeError: this evaluator"),
        ("tests.tiny_model:constant_reward", "no update was applied: every member scored the same mean reward"),
    ],
)
def test_a_run_that_cannot_learn_stops_with_the_reason(tmp_path, tiny_model_dir, capsys, evaluator, reason):
    run_dir = tmp_path / "run"
    overrides = _overrides(tiny_model_dir, **{"fleet.local": 1, "eval_every": 0, "task.evaluator": evaluator})
    overrides = [o for o in overrides if not o.startswith("iterations=")] + ["iterations=5"]
    assert main(["train", "--run-dir", str(run_dir), "--no-progress", *overrides]) == 2
    error = capsys.readouterr().err
    assert "stopping after 3 iterations in a row in which" in error and reason in error
    run = RunDirectory(run_dir)
    assert len(run.updates()) == len(run.metrics()) == 3  # the steps taken are logged: the run can resume
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["idle_iterations"] == 3
    assert summary["members_failed"] == (12 if "failing" in evaluator else 0)
    # answers cut at max_new_tokens are counted per iteration and over the run (none when every member failed)
    truncated = [row.truncated_answers for row in run.metrics() if not row.is_baseline]
    assert summary["truncated_answers"] == sum(truncated) and (sum(truncated) > 0) == ("constant" in evaluator)
