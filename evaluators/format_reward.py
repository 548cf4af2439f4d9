"""Format rewards: 1.0 when the completion has the answer format the task asks for, else 0.0.

`format` (alias `format-boxed`) wants exactly one non-empty `\\boxed{}`; `format-number` wants a
completion that is just a number. Useful alone for shaping or summed with a correctness reward.
"""

from __future__ import annotations

from seedcast.evaluators.answers import last_boxed, normalize_number


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
