"""The strict Countdown reward (`countdown-strict`): the expression must be right, as for the lenient one, and so
must every result the reply states for it; the lenient reward stays by name for the runs it scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.countdown import countdown_reward, countdown_strict_reward, stated_wrong_result
from seedcast.evaluators.registry import load_evaluator
from seedcast.optimizer.config_files import load_config

REPO_ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "2,4,7,9=37"  # e.g. (9 - 4) * 7 + 2


@pytest.mark.parametrize(
    "reply",
    [
        "(9 - 4) * 7 + 2",  # no result stated
        "(9-4)*7+2 = 37",
        "37 = 2 + 7 * (9 - 4)",
        "(9 - 4) * 7 + 2 = 37.",
        "First 9 - 4 = 6. Then (9 - 4) * 7 + 2 = 37",  # only the answer's run is judged, not the working
    ],
)
def test_a_right_expression_stating_the_target_or_nothing_scores_one(reply):
    assert countdown_strict_reward(reply, REFERENCE) == countdown_reward(reply, REFERENCE) == 1.0


@pytest.mark.parametrize(
    "reply",
    [
        "(9 - 4) * 7 + 2 = 969",  # the committed GRPO seed's kind of answer
        "36 = (9 - 4) * 7 + 2",  # a wrong result on the left
        "(9 - 4) * 7 + 2 = 37 = 38",  # any stated result must be right
        "(9 - 4) * 7 + 2 = 35 + 3",  # a stated expression that is not the target
    ],
)
def test_a_right_expression_stating_a_wrong_result_scores_zero(reply):
    assert countdown_strict_reward(reply, REFERENCE) == 0.0
    assert stated_wrong_result(reply, REFERENCE) == (countdown_reward(reply, REFERENCE) == 1.0)


def test_the_strict_reward_never_pays_what_the_lenient_one_refuses():
    for reply in ("(9 - 4) * 7", "9 * 4 + 1 = 37", "", "37", "(9 - 4) * 7 + 2, or maybe 9 * 4 + 1"):
        assert countdown_reward(reply, REFERENCE) == countdown_strict_reward(reply, REFERENCE) == 0.0
        assert not stated_wrong_result(reply, REFERENCE)
    assert countdown_strict_reward("2 + 4", "not a reference") is None


def test_the_strict_reward_is_a_built_in_evaluator_with_countdowns_instruction():
    config = load_config(overrides=["task.dataset=countdown", "task.evaluator=countdown-strict"])
    assert "exactly once" in config.task.instruction_text()
    samples = [ScoredSample("p", "2 + 4 = 6", "2,4=6"), ScoredSample("p", "2 + 4 = 7", "2,4=6")]
    assert load_evaluator("countdown-strict").score_batch(samples) == [1.0, 0.0]
    assert load_evaluator("countdown").score_batch(samples) == [1.0, 1.0]


def test_the_committed_rescoring_is_what_the_rewards_give_today(tmp_path):
    """docs/results/es-vs-grpo/countdown/strict-rescoring.json (bench/countdown_rescoring.py) is reproduced from the
    committed samples, and the lenient reward still gives every reward the runs logged."""
    folders = [f"docs/results/es-vs-grpo/countdown/{name}" for name in ("compare-greedy", "compare")]
    written = tmp_path / "rescoring.json"
    command = [sys.executable, "bench/countdown_rescoring.py", *folders, "--json", str(written)]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
    assert completed.returncode == 0, completed.stderr
    committed = REPO_ROOT / "docs" / "results" / "es-vs-grpo" / "countdown" / "strict-rescoring.json"
    assert json.loads(written.read_text()) == json.loads(committed.read_text())
    greedy = json.loads(written.read_text())[folders[0]]
    assert greedy["grpo@0"]["strict"] < 0.1 < greedy["grpo@0"]["lenient"]  # the seed that states wrong results
