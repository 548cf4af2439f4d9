"""ES update rules by name: how one step's Σ coeff·ε(seed) moves the float32 master.

A step (UpdateRequest, a line of the update log) names its rule and the rule's parameters; the
server checks them against this table before touching any weight, and applies the rule
(`apply.apply_rule`). A new rule is one entry here, its arithmetic in apply.py, and a strategy that emits
it (optimizer/es/); nothing in between changes. This table loads without torch: the optimizer names
the plain rule from it.

- `plain`: master += Σ coeff·ε(seed).
- `momentum`: a float32 velocity per server, v = β·v + Σ coeff·ε(seed); master += v. A run keeps one β,
  so the velocity is a function of the update log (one more float32 copy of the weights on each server).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

PLAIN_RULE = "plain"


@dataclass(frozen=True)
class UpdateRule:
    """A rule's parameters, each with the half-open range [low, high) it must lie in."""

    params: dict[str, tuple[float, float]]


UPDATE_RULES: dict[str, UpdateRule] = {
    PLAIN_RULE: UpdateRule(params={}),
    "momentum": UpdateRule(params={"momentum": (0.0, 1.0)}),
}


def rule_problems(rule: str, params: Mapping[str, float]) -> list[str]:
    """What is wrong with a step's rule and parameters (empty: it can be applied). An empty rule name,
    proto3's default, is the plain rule."""
    name = rule or PLAIN_RULE
    if name not in UPDATE_RULES:
        return [f"unknown update rule {rule!r}; this server applies {', '.join(UPDATE_RULES)}"]
    expected = UPDATE_RULES[name].params
    problems = [f"update rule {name} takes no parameter {key!r}" for key in params if key not in expected]
    for key, (low, high) in expected.items():
        value = params.get(key)
        if value is None:
            problems.append(f"update rule {name} needs the parameter {key!r}")
        elif not (math.isfinite(value) and low <= value < high):
            problems.append(f"{key} must be in [{low:g}, {high:g}), got {value}")
    return problems
