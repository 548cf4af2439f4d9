"""ES update rules by name: how one step's Σ coeff·ε(seed) moves the float32 master.

A step (UpdateRequest, a line of the update log) names its rule and the rule's parameters; the
server checks them against this table before touching any weight, and applies the rule. A new rule
is one entry here and a strategy that emits it (optimizer/es/); nothing in between changes.

- `plain`: master += Σ coeff·ε(seed).
- `momentum`: a float32 velocity per server, v = β·v + Σ coeff·ε(seed); master += v. A run keeps one β,
  so the velocity is a function of the update log (one more float32 copy of the weights on each server).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from seedcast.inference_server.noise.apply import apply_update_terms
from seedcast.inference_server.noise.source import NoiseSource

UNNAMED_RULE = ""  # proto3's default: a request that names no rule is a plain step


@dataclass(frozen=True)
class UpdateRule:
    """A rule's parameters, each with the half-open range [low, high) it must lie in."""

    params: dict[str, tuple[float, float]]


UPDATE_RULES: dict[str, UpdateRule] = {
    "plain": UpdateRule(params={}),
    "momentum": UpdateRule(params={"momentum": (0.0, 1.0)}),
}


def rule_problems(rule: str, params: Mapping[str, float]) -> list[str]:
    """What is wrong with a step's rule and parameters (empty: it can be applied)."""
    name = rule or "plain"
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


def apply_rule(
    master: Mapping[str, torch.Tensor],
    terms: list[tuple[int, float]],
    rule: str,
    params: Mapping[str, float],
    velocity: dict[str, torch.Tensor],
    source: NoiseSource,
    threads: int | None = None,
) -> None:
    """Apply one step to the float32 master; `velocity` is the caller's state kept from step to step (the
    momentum buffers, empty until a step uses them)."""
    problems = rule_problems(rule, params)
    if problems:
        raise ValueError("; ".join(problems))
    momentum = params["momentum"] if rule == "momentum" else 0.0
    apply_update_terms(master, terms, threads, source, momentum, velocity)
