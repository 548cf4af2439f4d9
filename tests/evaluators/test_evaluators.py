"""Evaluators on real lines of the public data and on adversarial completions."""

from __future__ import annotations

import json
import time

import pytest

from seedcast.evaluators.answers import last_boxed, last_number, normalize_number
from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.format_reward import (
    boxed_format_reward,
    countdown_format_reward,
    final_number_format_reward,
    number_format_reward,
)
from seedcast.evaluators.gsm8k import gsm8k_reference, gsm8k_reward
from seedcast.evaluators.math_answer import MathEvaluator
from seedcast.evaluators.synthetic import synthetic_problems, synthetic_reward


def _lines(path, count):
    with open(path) as handle:
        return [json.loads(next(handle)) for _ in range(count)]


def test_gsm8k_references_of_real_lines(data_dir):
    records = _lines(data_dir / "gsm8k" / "test.jsonl", 200)
    references = [gsm8k_reference(r["answer"]) for r in records]
    assert all(ref is not None for ref in references)
    assert references[0] == "18"  # Janet's ducks
    # Each reference scores its own worked solution as correct (the solution ends with "#### N").
    assert all(gsm8k_reward(r["answer"], r["answer"]) == 1.0 for r in records)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("She makes $18 every day.", 1.0),
        ("The answer is \\boxed{18}.", 1.0),
        ("18.0", 1.0),
        ("$18.00 dollars", 1.0),
        ("First 16 - 3 - 4 = 9, then 9 * 2 = 18", 1.0),
        ("\\boxed{18} but actually 20", 1.0),  # the box wins over a later number
        ("I think it is 17.", 0.0),
        ("no number at all", 0.0),
        ("", 0.0),
    ],
)
def test_gsm8k_prediction_rules(completion, expected):
    assert gsm8k_reward(completion, "some work\n#### 18") == expected


def test_gsm8k_thousands_separators():
    assert gsm8k_reward("a total of 1,234 apples", "#### 1234") == 1.0
    assert gsm8k_reward("\\boxed{1,234}", "#### 1,234") == 1.0


def test_gsm8k_unscorable_reference_is_none():
    assert gsm8k_reward("42", "#### not a number") is None


def test_huge_and_hostile_text_is_fast():
    huge = "9" * 200_000 + " filler " * 100_000 + "\\boxed{" * 1000
    started = time.perf_counter()
    assert gsm8k_reward(huge, "#### 5") == 0.0
    assert last_boxed("\\boxed{\\frac{3}") is None  # never closed
    assert time.perf_counter() - started < 2.0


def test_boxed_brace_matching_and_several_boxes():
    assert last_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("first \\boxed{1} then \\boxed{2}") == "2"
    assert last_boxed("\\fbox{7}") == "7"
    assert last_boxed("nothing") is None


def test_number_normalisation():
    assert normalize_number("1,000") == "1000"
    assert normalize_number("$3.50") == "3.5"
    assert normalize_number("-4.0") == "-4"
    assert normalize_number("abc") is None
    assert last_number("x = -3 and y = 2.5.") == "2.5"


@pytest.fixture(scope="module")
def math_evaluator():
    evaluator = MathEvaluator(timeout_seconds=20)
    yield evaluator
    evaluator.close()


def test_math500_solutions_box_their_answers(data_dir, math_evaluator):
    records = _lines(data_dir / "math500" / "test.jsonl", 40)
    samples = [ScoredSample(r["problem"], r["solution"], r["answer"]) for r in records]
    rewards = math_evaluator.score_batch(samples)
    # The reference solutions' own boxed answers are verified equal to the answer field.
    assert sum(r == 1.0 for r in rewards) >= 38, rewards


def test_math_equivalences(math_evaluator):
    cases = [
        ("so \\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("\\boxed{0.5}", "\\frac12", 1.0),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)", 1.0),
        ("\\boxed{2} and finally \\boxed{3}", "3", 1.0),
        ("\\boxed{2} and finally \\boxed{3}", "2", 0.0),
        ("the answer is 0.5 (no box)", "0.5", 0.0),
        ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
        ("\\boxed{7}", "8", 0.0),
    ]
    rewards = math_evaluator.score_batch([ScoredSample("", c, ref) for c, ref, _ in cases])
    assert rewards == [expected for _, _, expected in cases]


def test_synthetic_task_is_deterministic_and_verifiable():
    first = synthetic_problems(50, difficulty=2, seed=3)
    assert first == synthetic_problems(50, difficulty=2, seed=3)
    assert first != synthetic_problems(50, difficulty=2, seed=4)
    for problem in first:
        left, right = (int(x) for x in problem.prompt.removeprefix("What is ").rstrip("?").split(" + "))
        assert 10 <= left <= 99 and 10 <= right <= 99
        assert synthetic_reward(f"It is {left + right}", problem.reference) == 1.0
        assert synthetic_reward(f"{left + right + 1}", problem.reference) == 0.0
    products = synthetic_problems(5, difficulty=3, seed=0)
    assert all("×" in p.prompt for p in products)
    with pytest.raises(ValueError, match="difficulty"):
        synthetic_problems(1, difficulty=99)


def test_format_rewards():
    assert boxed_format_reward("so \\boxed{4}", "") == 1.0
    assert boxed_format_reward("\\boxed{4} \\boxed{5}", "") == 0.0
    assert boxed_format_reward("\\boxed{}", "") == 0.0
    assert number_format_reward(" 42 ", "") == 1.0
    assert number_format_reward("42 apples", "") == 0.0


@pytest.mark.parametrize(
    ("reply", "reward"),
    [
        ("12 + 30 = 42", 1.0),
        ("The answer is 41.", 1.0),  # a wrong number in the right place still counts: format only
        ("**42**", 1.0),
        ("To add 12 and 30 we first line up the", 0.0),  # cut off by the token budget
        ("42 is what you get when", 0.0),
        ("", 0.0),
    ],
)
def test_final_number_format_rewards_shape_not_value(reply, reward):
    assert final_number_format_reward(reply, "42") == reward


@pytest.mark.parametrize(
    ("reply", "reward"),
    [
        ("(3 + 5) * 2 = 16", 1.0),
        ("9 - 1", 1.0),  # neither the given numbers nor the target: format only
        ("The answer is 16", 0.0),  # a number, no expression
        ("Let me think about how to", 0.0),
    ],
)
def test_countdown_format_rewards_a_parsable_expression(reply, reward):
    assert countdown_format_reward(reply, "2,3,5=16") == reward


def test_format_controls_keep_the_prompts_of_the_task_they_control_for():
    from seedcast.evaluators.tasks import default_instruction

    assert default_instruction("format-final-number") == default_instruction("synthetic")
    assert default_instruction("format-countdown") == default_instruction("countdown")
