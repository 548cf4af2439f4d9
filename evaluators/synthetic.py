"""An offline arithmetic task: procedurally generated problems with exact answers, no download.

The difficulty knob picks the operand sizes. Calibrated on the bundled SmolLM2-135M-Instruct
(greedy, "reply with only the final number"): level 1 (1-digit sums) is mostly right, level 2
(2-digit sums) starts in the 15–50% band the ES runs need, higher levels are harder.

    >>> problems = synthetic_problems(count=2, difficulty=2, seed=0)
    >>> synthetic_reward("The answer is 41", problems[0].reference) in (0.0, 1.0)
    True
"""

from __future__ import annotations

import random

from seedcast.evaluators.answers import last_number, normalize_number
from seedcast.evaluators.base import Problem
from seedcast.evaluators.generator import Generator

SYNTHETIC_INSTRUCTION = "Reply with only the final number."
# difficulty -> (operator, digits of the left operand, digits of the right operand)
LEVELS: dict[int, tuple[str, int, int]] = {
    1: ("+", 1, 1),
    2: ("+", 2, 2),
    3: ("*", 1, 2),
    4: ("+", 3, 3),
    5: ("*", 2, 2),
    6: ("*", 3, 3),
}


def _operand(rng: random.Random, digits: int) -> int:
    low = 10 ** (digits - 1) if digits > 1 else 1
    return rng.randint(low, 10**digits - 1)


def synthetic_problems(count: int, difficulty: int = 2, seed: int = 0) -> list[Problem]:
    """`count` arithmetic problems of the given difficulty, a pure function of (count, difficulty, seed)."""
    if difficulty not in LEVELS:
        raise ValueError(f"synthetic difficulty must be one of {sorted(LEVELS)}, got {difficulty}")
    operator, left_digits, right_digits = LEVELS[difficulty]
    rng = random.Random(f"seedcast-synthetic:{difficulty}:{seed}")
    problems = []
    for index in range(count):
        left, right = _operand(rng, left_digits), _operand(rng, right_digits)
        answer = left + right if operator == "+" else left * right
        symbol = "+" if operator == "+" else "×"
        problems.append(
            Problem(
                prompt=f"What is {left} {symbol} {right}?",
                reference=str(answer),
                problem_id=f"synthetic-{difficulty}-{seed}-{index}",
            )
        )
    return problems


SYNTHETIC_GENERATOR = Generator(problems=synthetic_problems, levels=LEVELS, level_setting="synthetic_difficulty")


def synthetic_reward(completion: str, reference: str) -> float | None:
    """1.0 if the last number in the completion equals the reference, else 0.0."""
    expected = normalize_number(reference)
    if expected is None:
        return None
    return 1.0 if last_number(completion) == expected else 0.0
