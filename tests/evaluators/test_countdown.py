"""Countdown: the generator's problems are solvable, and the reward parses safely and exactly."""

from __future__ import annotations

from fractions import Fraction

import pytest

from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.countdown import (
    LEVELS,
    ExpressionError,
    countdown_problems,
    countdown_reward,
    evaluate_expression,
    parse_reference,
)
from seedcast.evaluators.datasets import load_problems
from seedcast.evaluators.registry import load_evaluator
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config

REFERENCE = "2,4,7,9=37"  # e.g. (9 - 4) * 7 + 2


@pytest.mark.parametrize(
    "reply",
    [
        "(9 - 4) * 7 + 2",
        "(9-4)*7+2 = 37",
        "37 = 2 + 7 * (9 - 4)",
        "The answer is: (9 − 4) is 5, so\n(9 - 4) × 7 + 2",
        "<answer> 7*(9-4)+2 </answer>",
        "\\boxed{(9 - 4) * 7 + 2}",
        "2 + 7 × (9 - 4).",
    ],
)
def test_right_expressions_score_one(reply):
    assert countdown_reward(reply, REFERENCE) == 1.0


@pytest.mark.parametrize(
    "reply",
    [
        "(9 - 4) * 7 + 3",  # a number that is not given
        "(9 - 4) * 7",  # 2 unused
        "(9 - 4) * 7 + 2 + 2",  # 2 used twice
        "9 * 4 + 1",  # wrong numbers and wrong value
        "4 * 9 + 7 - 2 * 2",  # right value needs 2 twice
        "2 * 4 * 7 - 9",  # uses each number once, wrong value (47)
        "37",  # the target alone
        "(9 - 4) * 7 + 2, or maybe 9 * 4 + 1",  # only the last expression counts: no spraying attempts
        "(9 - 4) * 7 + 2 = 38 - 1",  # the last side is the answer
    ],
)
def test_wrong_expressions_score_zero(reply):
    assert countdown_reward(reply, REFERENCE) == 0.0


@pytest.mark.parametrize(
    "reply",
    ["", "I don't know", "((9 - 4) * 7 + 2", "(9 - 4) * * 7 + 2", "(9 - 4) 7 + 2", "-(4 - 9) * 7 + 2", "9 ** 4"],
)
def test_malformed_replies_score_zero(reply):
    assert countdown_reward(reply, REFERENCE) == 0.0


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 40 + "1" + ")" * 40,  # deeper than the nesting bound: refused, no RecursionError
        "1+" * 150 + "1",  # longer than the length bound
        "1/(2-2)",  # division by zero
        "__import__('os').system('true')",  # not arithmetic at all: never evaluated
        "9 ** 9 ** 9",  # no exponent: refused, not computed
    ],
)
def test_adversarial_expressions_are_refused_without_evaluation(expression):
    with pytest.raises(ExpressionError):
        evaluate_expression(expression)


def test_values_are_exact_fractions():
    assert evaluate_expression("1/3 + 1/3 + 1/3") == (Fraction(1), [1, 3, 1, 3, 1, 3])
    assert countdown_reward("(1 / 3 + 3) * 3", "1,3,3,3=10") == 1.0
    assert countdown_reward("8 / 3 * 3", "3,3,8=8") == 1.0  # 8/3 is not an integer, the result is


def test_malformed_references_cannot_be_scored():
    assert parse_reference("4,7=x") is None
    assert countdown_reward("4 + 7", "not a reference") is None


@pytest.mark.parametrize("difficulty", sorted(LEVELS))
def test_generated_problems_are_solvable_and_a_pure_function_of_the_seed(difficulty):
    problems = countdown_problems(50, difficulty, seed=3)
    assert problems == countdown_problems(50, difficulty, seed=3)
    assert problems != countdown_problems(50, difficulty, seed=4)
    count, largest = LEVELS[difficulty]
    for problem in problems:
        numbers, target = parse_reference(problem.reference)
        assert len(numbers) == count and all(1 <= n <= largest for n in numbers) and target >= 1
        assert ", ".join(map(str, numbers)) in problem.prompt and str(target) in problem.prompt


def test_countdown_is_a_task_like_the_others():
    config = load_config(overrides=["task.dataset=countdown", "task.countdown_difficulty=3", "task.synthetic_size=20"])
    assert config.task.evaluator_spec() == "countdown-strict"  # a stated wrong result scores 0 in new runs
    assert "exactly once" in config.task.instruction_text()
    lenient = load_config(overrides=["task.dataset=countdown", "task.evaluator=countdown"])
    assert lenient.task.evaluator_spec() == "countdown"  # the committed runs' reward, by name
    assert lenient.task.instruction_text() == config.task.instruction_text()
    problems = load_problems(config.task.dataset_spec(config.seed))
    assert len(problems) == 20 and problems == countdown_problems(20, 3, seed=0)
    assert load_evaluator("countdown").score_batch([ScoredSample("p", "2 + 4", "2,4=6")]) == [1.0]
    with pytest.raises(ConfigError, match="task.countdown_difficulty"):
        load_config(overrides=["task.dataset=countdown", "task.countdown_difficulty=9"])
