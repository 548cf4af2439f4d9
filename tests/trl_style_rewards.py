"""Reward functions in TRL's convention for tests: importable by servers as `tests.trl_style_rewards:NAME`."""

from __future__ import annotations


def one_per_answer(prompts: list, completions: list, **_columns) -> list[float]:
    """1.0 for every completion."""
    return [1.0] * len(completions)


def target_length(prompts: list, completions: list, target: list, **_columns) -> list[float | None]:
    """The length of the problem's `target` column, None where the problem has none."""
    return [None if value is None else float(len(value)) for value in target]
