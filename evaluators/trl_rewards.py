"""Reward functions in TRL's convention: `f(prompts, completions, **columns) -> list[float | None]`, called
once per batch with the problem's other dataset columns as keyword arguments (each a list aligned with the
completions), any scale, several of them summed with weights (TRL's `reward_funcs` and `reward_weights`).

A spec names them for servers to import: `trl:module:function`, several joined by `+`, each with an optional
weight, `trl:0.5*mymod:accuracy+mymod:format_ok` (weight 1 when none). A part may instead be
`remote:http(s)://HOST/PATH`, a function served over HTTP (POST `{"prompts", "completions", "columns"}`,
answer `{"rewards": [...]}`): `seedcast.train(reward_funcs=[...])` serves a function the servers cannot import
(one written in a notebook) that way from its own process (api/reward_functions.py).

A None from a function means it does not apply to that sample (TRL's convention); the weighted sum skips it,
and a sample no function scored is not scorable.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seedcast.evaluators.base import ScoredSample, checked_any_scale

PREFIX = "trl:"
REMOTE = "remote:"


class RewardSpecError(ValueError):
    """A `trl:` spec that does not parse or names nothing importable."""


@dataclass(frozen=True)
class WeightedFunction:
    """One reward function, its name in errors, and its weight in the sum."""

    name: str
    function: Callable[..., Sequence[float | None]]
    weight: float = 1.0


def format_spec(parts: Sequence[tuple[str, float]]) -> str:
    """The `trl:` spec of (module:function, weight) parts."""
    return PREFIX + "+".join(name if weight == 1 else f"{weight!r}*{name}" for name, weight in parts)


def parse_spec(spec: str) -> list[tuple[str, float]]:
    """(module:function, weight) for each part of a `trl:` spec."""
    parts = []
    for part in spec.removeprefix(PREFIX).split("+"):
        weight_text, star, name = part.rpartition("*")
        try:
            weight = float(weight_text) if star else 1.0
        except ValueError:
            raise RewardSpecError(f"{spec}: {weight_text!r} is not a weight (write WEIGHT*module:function)") from None
        remote = name.startswith(REMOTE) and name.removeprefix(REMOTE).startswith(("http://", "https://"))
        if not math.isfinite(weight) or not (remote or (name.count(":") == 1 and all(name.split(":")))):
            raise RewardSpecError(f"{spec}: each part is [WEIGHT*]module:function or remote:URL, got {part!r}")
        parts.append((name, weight))
    return parts


def _imported(name: str) -> Callable:
    if name.startswith(REMOTE):
        return RemoteRewardFunction(name.removeprefix(REMOTE))
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise RewardSpecError(f"cannot import module {module_name!r} for reward function {name!r}: {error}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise RewardSpecError(f"module {module_name!r} has no function {attribute!r}")
    return function


class TRLRewardEvaluator:
    """Scores a batch with reward functions in TRL's convention and sums them with their weights."""

    def __init__(self, functions: Sequence[WeightedFunction]) -> None:
        if not functions:
            raise RewardSpecError("at least one reward function is needed")
        self.functions = list(functions)

    @classmethod
    def from_spec(cls, spec: str) -> TRLRewardEvaluator:
        """The evaluator a `trl:` spec names (every function imported now, so a typo fails at once)."""
        return cls([WeightedFunction(name, _imported(name), weight) for name, weight in parse_spec(spec)])

    def score_batch(self, samples: list[ScoredSample]) -> list[float | None]:
        """One call per function over the whole batch; the weighted sum per sample (None: no function scored)."""
        # Conversational problems are given as TRL gives them: the messages, and the completion as a message.
        prompts = [list(s.messages) if s.messages else s.prompt for s in samples]
        completions = [
            [{"role": "assistant", "content": s.completion}] if s.messages else s.completion for s in samples
        ]
        names = sorted({name for s in samples for name in s.columns} - {"prompts", "completions"})
        columns = {name: [s.columns.get(name) for s in samples] for name in names}
        totals: list[float | None] = [None] * len(samples)
        for weighted in self.functions:
            values = weighted.function(prompts=prompts, completions=completions, **columns)
            values = list(values) if values is not None else []
            if len(values) != len(samples):
                raise ValueError(f"reward function {weighted.name!r} returned {len(values)} rewards for {len(samples)}")
            for index, value in enumerate(values):
                reward = checked_any_scale(value, weighted.name)
                if reward is not None:
                    totals[index] = (totals[index] or 0.0) + weighted.weight * reward
        return totals


class RemoteRewardFunction:
    """A reward function in TRL's convention behind an HTTP endpoint (see the module docstring); like
    `remote:` evaluators it follows no redirect and never quotes what the endpoint answered."""

    def __init__(self, url: str, timeout_seconds: float = 300.0) -> None:
        import requests

        self.session = requests.Session()
        self.url = url
        self.timeout_seconds = timeout_seconds

    def __call__(self, prompts: list, completions: list, **columns: list) -> list[float | None]:
        payload = {"prompts": prompts, "completions": completions, "columns": columns}
        response = self.session.post(self.url, json=payload, timeout=self.timeout_seconds, allow_redirects=False)
        if response.status_code != 200:
            raise ValueError(f"reward function at {self.url} answered HTTP {response.status_code}, not 200")
        try:
            rewards = response.json().get("rewards")
        except (ValueError, AttributeError):
            rewards = None
        if not isinstance(rewards, list):
            raise ValueError(f"reward function at {self.url} must answer {{'rewards': [...]}}")
        return rewards
