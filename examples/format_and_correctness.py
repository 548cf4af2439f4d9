"""A custom evaluator: half a point for answering in the asked-for format, half for the right number.

Servers load evaluators by spec, so this module must be importable where they run (run from the repository
root, or install it): `task.evaluator=examples.format_and_correctness:reward`. A function returns a float
in [0, 1], or None when the sample cannot be scored (here: a reference that is not a number), which
Seedcast leaves out of the member's mean instead of counting it as wrong.
"""

from __future__ import annotations

import re

_FINAL_NUMBER = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s*\.?\s*$")


def reward(completion: str, reference: str) -> float | None:
    """0.5 if the reply ends on a number, plus 0.5 if that number equals the reference."""
    try:
        expected = float(reference.replace(",", ""))
    except ValueError:
        return None
    match = _FINAL_NUMBER.search(completion.strip())
    if match is None:
        return 0.0
    return 0.5 + (0.5 if float(match.group(1).replace(",", "")) == expected else 0.0)
