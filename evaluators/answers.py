"""Answer extraction shared by the evaluators: the last `\\boxed{}` (brace-matched), the last number.

Normalisation follows the GSM8K reference format (openai/grade-school-math: the final answer after
`####`), ignoring thousands separators, `$` and a trailing `.0` as nanochat's `tasks/gsm8k.py` does.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\$?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_BOX_COMMANDS = ("\\boxed", "\\fbox")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces matched; None if there is none."""
    start = max(text.rfind(command) for command in _BOX_COMMANDS)
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for index in range(brace, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : index]
    return None  # unbalanced: the box never closed


def normalize_number(text: str) -> str | None:
    """Canonical form of a number string: no `,` or `$`, integers without `.0`; None if not a number."""
    cleaned = text.strip().replace(",", "").replace("$", "").rstrip(".").strip()
    try:
        value = float(cleaned)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if value.is_integer() and abs(value) < 1e18:
        return str(int(value))
    return repr(value)


def last_number(text: str) -> str | None:
    """The last number in the text, normalised; None when there is none."""
    matches = _NUMBER.findall(text)
    for candidate in reversed(matches):
        normalized = normalize_number(candidate)
        if normalized is not None:
            return normalized
    return None


def predicted_number(completion: str) -> str | None:
    """The model's numeric answer: the boxed content if any (as a number), else the last number."""
    boxed = last_boxed(completion)
    if boxed is not None:
        number = normalize_number(boxed)
        return number if number is not None else last_number(boxed)
    return last_number(completion)
