"""A member's fitness from its rewards, before shaping: the mean, per-prompt normalised, or the mean pass@k.

`mean` (the default): a member's fitness is its mean reward over the iteration's prompts.

`per_prompt`: prompt difficulty is the largest variance in a member's mean reward, and it says
nothing about the perturbation. Each prompt's rewards are centred and scaled across the population
first (as GRPO normalises a prompt's group of samples), so a prompt every member scores alike adds
nothing, and a prompt that separates members adds the same weight however hard it is; the member's
fitness is the mean of its normalised rewards. Centring alone would change nothing after z-score
shaping (it subtracts the same constant from every member), so the scaling is the point.

`pass_at_k` (with es.fitness_k = k): coverage instead of accuracy. Each member samples m >= k answers per
prompt (sampling.samples_per_prompt) and the server makes each prompt's reward the unbiased pass@k estimate of
them (evaluators/pass_at_k.py); the member's fitness is the mean over prompts. A member that is right on some
sample of many prompts then beats one that is right every time on a few.

    >>> per_prompt_fitness({0: [1.0, 0.0], 1: [0.0, 0.0]})
    {0: 0.5, 1: -0.5}
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from seedcast.proto.scorable import mean_of_scorable


def mean_fitness(rewards: dict[int, list[float]]) -> dict[int, float]:
    """Member -> mean of its scorable (non-NaN) prompt rewards; NaN when none is scorable."""
    fitness = {}
    for member, values in rewards.items():
        fitness[member] = mean_of_scorable(values)
    return fitness


def per_prompt_fitness(rewards: dict[int, list[float]]) -> dict[int, float]:
    """Member -> mean over prompts of (reward − prompt mean) / prompt std across the members; prompts where
    the members do not differ count 0; NaN rewards (not scorable) are left out of both."""
    members = sorted(rewards)
    if not members:
        return {}
    lengths = {len(rewards[m]) for m in members}
    if len(lengths) != 1:
        raise ValueError(f"members answered different numbers of prompts: {sorted(lengths)}")
    matrix = np.array([rewards[m] for m in members], dtype=np.float64)  # members × prompts
    scored = ~np.isnan(matrix)
    counts = scored.sum(axis=0)
    filled = np.where(scored, matrix, 0.0)
    means = filled.sum(axis=0) / np.maximum(counts, 1)
    deviations = np.where(scored, matrix - means, 0.0)
    stds = np.sqrt((deviations**2).sum(axis=0) / np.maximum(counts, 1))
    informative = stds > 1e-12
    normalised = np.where(scored & informative, deviations / np.where(informative, stds, 1.0), 0.0)
    per_member = scored.sum(axis=1)
    fitness = np.where(per_member > 0, normalised.sum(axis=1) / np.maximum(per_member, 1), np.nan)
    return {m: float(f) for m, f in zip(members, fitness, strict=True)}


FITNESS_MODES: dict[str, Callable[[dict[int, list[float]]], dict[int, float]]] = {
    "mean": mean_fitness,
    "per_prompt": per_prompt_fitness,
    # The servers make each prompt's reward the pass@k of its samples (MemberTask.pass_at_k): the mean is then
    # the member's mean pass@k.
    "pass_at_k": mean_fitness,
}


def member_fitness(rewards: dict[int, list[float]], mode: str) -> dict[int, float]:
    """Fitness of the members that returned, by mode (see the module docstring)."""
    if mode not in FITNESS_MODES:
        raise ValueError(f"unknown fitness mode {mode!r}; choose one of {', '.join(FITNESS_MODES)}")
    return FITNESS_MODES[mode](rewards)
