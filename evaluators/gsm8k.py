"""GSM8K: exact match of the final number (reference after `####`; prediction = boxed or last number).

>>> gsm8k_reward("So she sold 72 clips.", "48+24 = <<48+24=72>>72\\n#### 72")
1.0
"""

from __future__ import annotations

from seedcast.evaluators.answers import normalize_number, predicted_number

GSM8K_INSTRUCTION = "Solve the problem step by step, then give the final number as \\boxed{N}."


def gsm8k_reference(answer: str) -> str | None:
    """The final answer of a GSM8K solution (text after `####`), normalised; a bare number is accepted too."""
    tail = answer.rsplit("####", 1)[-1]
    return normalize_number(tail)


def gsm8k_reward(completion: str, reference: str) -> float | None:
    """1.0 if the predicted number equals the reference, 0.0 if not; None if the reference is not a number."""
    expected = gsm8k_reference(reference)
    if expected is None:
        return None
    return 1.0 if predicted_number(completion) == expected else 0.0
