"""bench/countdown_operations.py: which operation each problem needs, which operators each answer uses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import countdown_operations  # noqa: E402
from countdown_operations import answer_operators, markdown, needed_operations, operations_table  # noqa: E402


def test_the_operation_a_target_needs_in_either_order():
    assert needed_operations("41,39=80") == ("+",)
    assert needed_operations("23,36=13") == ("-",)  # 36 - 23
    assert needed_operations("6,7=42") == ("*",)
    assert needed_operations("6,42=7") == ("/",)  # 42 / 6
    assert needed_operations("2,2=4") == ("+", "*")
    assert needed_operations("0,5=0") == ("*", "/")  # 0 / 5, and no division by zero raised for 5 / 0
    assert needed_operations("3,4=50") == ()
    with pytest.raises(ValueError, match="two-number"):
        needed_operations("1,2,3=6")


def test_the_operators_of_the_expression_the_evaluator_scores():
    assert answer_operators("41 + 39 = 80") == {"+"}
    assert answer_operators("First 36 - 23 = 13, so (6 × 7) / 1") == {"*", "/"}  # the last expression counts
    assert answer_operators("The answer is 42.") == {countdown_operations.NONE}  # a lone number applies no operator


def test_a_model_that_always_adds_shows_as_such():
    rows = [
        {"reference": "41,39=80", "completions": ["41 + 39 = 80", "41 + 39"], "rewards": [1.0, 1.0]},
        {"reference": "23,36=13", "completions": ["23 + 36 = 59", "36 - 23"], "rewards": [0.0, 1.0]},
        {"reference": "6,7=42", "completions": ["6 + 7", "I give up"], "rewards": [0.0, 0.0]},
    ]
    table = operations_table(rows)
    assert table["accuracy_by_needed_operation"] == {
        "+": {"problems": 1, "right": 1.0},
        "-": {"problems": 1, "right": 0.5},
        "*": {"problems": 1, "right": 0.0},
    }
    assert table["answers_using"] == {"+": 4 / 6, "-": 1 / 6, "*": 0.0, "/": 0.0, "none": 1 / 6}
    lines = markdown({"adder": table}).splitlines()
    assert lines[0].startswith("| model | right when target needs + (1) | right when target needs - (1) |")
    assert lines[2] == "| adder | 1.00 | 0.50 | 0.00 | 67% | 17% | 0% | 0% | 17% |"
