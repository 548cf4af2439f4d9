"""The evaluator protocol and the values it scores.

Evaluators score in batches (`score_batch`) so reward models and remote endpoints can batch; a plain
function `(completion, reference) -> float | None` is wrapped by `FunctionEvaluator`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Problem:
    """A problem of a dataset: the user message and the reference answer."""

    prompt: str
    reference: str
    problem_id: str = ""
    columns: str = ""  # the record's other fields as a JSON object, when the evaluator takes them (TRL rewards)
    # A conversational prompt (TRL's format) as (role, content) pairs; `prompt` is then its last user message.
    messages: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ScoredSample:
    """What an evaluator sees: the prompt, the model's completion, the reference answer and, for reward
    functions in TRL's convention, the problem's other dataset columns."""

    prompt: str
    completion: str
    reference: str
    columns: Mapping[str, Any] = field(default_factory=dict)
    messages: tuple[Mapping[str, str], ...] = ()  # the conversation, when the prompt was one (TRL's format)


@dataclass(frozen=True)
class ScoringInputs:
    """What a batch's completions are scored against, per problem: the user message's text, the reference, and
    (None when no problem has any) the dataset columns and the conversation."""

    texts: list[str]
    references: list[str]
    columns: list[dict[str, Any]] | None = None
    messages: list[tuple[Mapping[str, str], ...]] | None = None

    def part(self, problems: slice) -> ScoringInputs:
        """The inputs of a slice of the problems."""
        columns = self.columns[problems] if self.columns is not None else None
        messages = self.messages[problems] if self.messages is not None else None
        return ScoringInputs(self.texts[problems], self.references[problems], columns, messages)

    def samples(self, index: int, completions: list[str]) -> list[ScoredSample]:
        """Problem `index`'s completions as samples to score."""
        columns = self.columns[index] if self.columns is not None else {}
        messages = self.messages[index] if self.messages is not None else ()
        text, reference = self.texts[index], self.references[index]
        return [ScoredSample(text, completion, reference, columns, messages) for completion in completions]


@runtime_checkable
class Evaluator(Protocol):
    """Scores samples; each reward is in [0, 1], or None when the sample cannot be scored."""

    def score_batch(self, samples: list[ScoredSample]) -> list[float | None]:
        """One reward per sample, in order."""


class FunctionEvaluator:
    """Adapts `fn(completion, reference) -> float | None` to the Evaluator protocol."""

    def __init__(self, fn: Callable[[str, str], float | None], name: str = "") -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "custom")

    def score_batch(self, samples: list[ScoredSample]) -> list[float | None]:
        """Call the function on each sample and check its result."""
        return [checked_reward(self.fn(s.completion, s.reference), self.name) for s in samples]


def _number(value: object, who: str, expected: str) -> float | None:
    """None, or `value` as a float (bools count as 0/1); a TypeError naming `who` and what was expected else."""
    if value is None:
        return None
    if not isinstance(value, (int, float)):
        raise TypeError(f"{who} returned {type(value).__name__}; expected {expected} or None")
    return float(value)


def checked_any_scale(value: object, evaluator_name: str) -> float | None:
    """Validate a reward of any scale (TRL's convention): None, or a finite number (bools count as 0/1)."""
    reward = _number(value, f"reward function {evaluator_name!r}", "a float")
    if reward is not None and not math.isfinite(reward):
        raise ValueError(f"reward function {evaluator_name!r} returned {reward}; rewards must be finite")
    return reward


def checked_reward(value: object, evaluator_name: str) -> float | None:
    """Validate an evaluator's output: None, or a finite number in [0, 1] (bools count as 0/1)."""
    reward = _number(value, f"evaluator {evaluator_name!r}", "a float in [0, 1]")
    if reward is not None and (not math.isfinite(reward) or not 0.0 <= reward <= 1.0):
        raise ValueError(f"evaluator {evaluator_name!r} returned {reward}; rewards must lie in [0, 1]")
    return reward
