"""One member's evaluation on a backend: perturb, generate, restore, score (synchronous).

Restore runs in a `finally` right after generation, so no error — in generation, scoring, or a
cancelled call — can leave perturbed weights behind. Scoring needs only text, so it runs after.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from seedcast.evaluators.base import Evaluator, ScoringInputs
from seedcast.evaluators.pass_at_k import prompt_pass_at_k
from seedcast.inference_server.backends.base import Backend, BatchMember, Completion, Sampling
from seedcast.proto.scorable import mean_of_scorable


@dataclass
class MemberOutcome:
    """Per-prompt rewards (their samples' mean or pass@k; NaN: nothing scorable), per-prompt tokens, phase timings
    in seconds."""

    rewards: list[float]
    completion_tokens: list[int]
    perturb_seconds: float
    generate_seconds: float
    restore_seconds: float
    score_seconds: float
    truncated: int = 0  # completions that stopped at max_new_tokens before ending


def score_completions(
    evaluator: Evaluator, scoring: ScoringInputs, completions: list[list[Completion]]
) -> list[list[float | None]]:
    """Per problem, the reward of each of its completions, scored in one batch."""
    samples = [
        sample for index, group in enumerate(completions) for sample in scoring.samples(index, [c.text for c in group])
    ]
    flat = evaluator.score_batch(samples)
    if len(flat) != len(samples):
        raise ValueError(f"evaluator returned {len(flat)} rewards for {len(samples)} samples")
    rewards, start = [], 0
    for group in completions:
        rewards.append(list(flat[start : start + len(group)]))
        start += len(group)
    return rewards


def prompt_rewards(per_prompt: list[list[float | None]], pass_at_k: int = 0) -> list[float]:
    """Each prompt's reward from its samples' (MemberTask.pass_at_k): their mean (0), or the pass@k estimate."""
    if pass_at_k:
        return [prompt_pass_at_k(group, pass_at_k) for group in per_prompt]
    return [mean_of_scorable(group) for group in per_prompt]


def _truncated(completions: list[list[Completion]]) -> int:
    return sum(completion.truncated for group in completions for completion in group)


def evaluate_member(
    backend: Backend,
    evaluator: Evaluator,
    *,
    prompts: list[str],
    scoring: ScoringInputs,
    system_prompt: str,
    seed: int,
    sigma: float,
    sign: int,
    sampling: Sampling,
    stochastic_rounding: bool = False,
    rank: int = 0,
    pass_at_k: int = 0,
    stop: threading.Event | None = None,
) -> MemberOutcome:
    """Evaluate the member (seed, sign·σ, perturbation rank `rank`) on the prompts, each prompt's reward the mean
    of its samples' or their pass@k (`pass_at_k`); weights are restored whatever happens, also when `stop` ends
    the generation early (GenerationStopped)."""
    started = time.perf_counter()
    try:
        backend.perturb(seed, sigma, sign, stochastic_rounding, rank)
        perturbed = time.perf_counter()
        completions = backend.generate(prompts, sampling, system_prompt, stop=stop)
        generated = time.perf_counter()
    finally:
        backend.restore()
    restored = time.perf_counter()
    per_prompt = score_completions(evaluator, scoring, completions)
    scored = time.perf_counter()
    return MemberOutcome(
        rewards=prompt_rewards(per_prompt, pass_at_k),
        completion_tokens=[sum(c.tokens for c in group) for group in completions],
        perturb_seconds=perturbed - started,
        generate_seconds=generated - perturbed,
        restore_seconds=restored - generated,
        score_seconds=scored - restored,
        truncated=_truncated(completions),
    )


def evaluate_members_batched(
    backend: Backend,
    evaluator: Evaluator,
    *,
    prompts: list[str],
    scoring: ScoringInputs,
    system_prompt: str,
    members: list[BatchMember],
    sampling_seeds: list[int],
    sampling: Sampling,
    pass_at_k: int = 0,
    stop: threading.Event | None = None,
) -> list[MemberOutcome]:
    """Evaluate low-rank members together in one batched generation (backends/batched_members.py). The weights
    are never perturbed, so there is nothing to restore; each member is charged an equal share of the
    generation's seconds and its own scoring."""
    started = time.perf_counter()
    answers = backend.generate_members(members, sampling_seeds, prompts, sampling, system_prompt, stop=stop)
    generate_share = (time.perf_counter() - started) / len(members)
    outcomes = []
    for completions in answers:
        scoring_started = time.perf_counter()
        per_prompt = score_completions(evaluator, scoring, completions)
        outcomes.append(
            MemberOutcome(
                rewards=prompt_rewards(per_prompt, pass_at_k),
                completion_tokens=[sum(c.tokens for c in group) for group in completions],
                perturb_seconds=0.0,
                generate_seconds=generate_share,
                restore_seconds=0.0,
                score_seconds=time.perf_counter() - scoring_started,
                truncated=_truncated(completions),
            )
        )
    return outcomes
