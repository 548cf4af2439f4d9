"""Format rewards: 1.0 when the completion has the answer format the task asks for, else 0.0.

`format` (alias `format-boxed`) wants exactly one non-empty `\\boxed{}`; `format-number` wants a
completion that is just a number. Useful alone for shaping or summed with a correctness reward.

Two are controls for the ES-vs-GRPO experiment, rewarding the answer's shape and never its value, so that a
run trained on them shows how much of a held-out gain is format alone: `format-final-number` (the
arithmetic task: the reply ends on a number) and `format-countdown` (the reply has an arithmetic
expression that parses and applies an operator, whatever numbers it uses and whatever it equals).
"""

from __future__ import annotations

import re

from seedcast.evaluators.answers import last_boxed, normalize_number
from seedcast.evaluators.countdown import final_expression

# A number at the very end of the reply, optionally followed by closing punctuation or markup.
_ENDS_ON_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?[\s.!)*_`\]}]*$")


def boxed_format_reward(completion: str, reference: str) -> float:
    """1.0 if the completion holds exactly one non-empty boxed answer."""
    del reference
    count = completion.count("\\boxed{") + completion.count("\\fbox{")
    boxed = last_boxed(completion)
    return 1.0 if count == 1 and boxed is not None and boxed.strip() else 0.0


def number_format_reward(completion: str, reference: str) -> float:
    """1.0 if the whole completion is a single number."""
    del reference
    return 1.0 if normalize_number(completion) is not None else 0.0


def final_number_format_reward(completion: str, reference: str) -> float:
    """1.0 if the reply ends on a number (`12 + 30 = 42`, `The answer is 42.`), right or wrong; 0.0 if it
    stops elsewhere, e.g. cut off mid-sentence by the token budget."""
    del reference
    return 1.0 if _ENDS_ON_NUMBER.search(completion.strip()) else 0.0


def countdown_format_reward(completion: str, reference: str) -> float:
    """1.0 if the reply holds an expression the Countdown evaluator would take as its answer (it parses and
    applies an operator), whether or not it uses the given numbers or reaches the target."""
    del reference
    return 1.0 if final_expression(completion) is not None else 0.0
