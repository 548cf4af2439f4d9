"""Scoring a cached evaluation's samples again under another evaluator, instead of sampling them again.

A sample depends on the weights, the sampling options, the problems and the prompt (the problem and the
instruction appended to it); its reward depends on the evaluator alone. So an evaluation cached under one
built-in evaluator serves another built-in evaluator that asks for the answer the same way (the same
instruction, e.g. `countdown` and `countdown-strict`): its samples are scored again in this process and its
numbers recomputed, with no weights needed. That is how the committed Countdown evaluations, made under the
lenient reward, are judged under the strict one although GRPO's weights are gone. Any other evaluator (a reward
model, a remote endpoint, a user's function) is never applied this way: `seedcast compare` samples again.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.registry import BUILTIN_EVALUATORS, load_evaluator
from seedcast.evaluators.tasks import default_instruction
from seedcast.optimizer.atomic_file import write_atomically
from seedcast.studies.evaluate import EvalOptions, ProblemOutcome, final_answer, summarize
from seedcast.studies.reward_hacking import stated_wrong_result_rate

SAMPLES_FILE, RESULTS_FILE = "samples.jsonl", "results.json"


def recorded_instruction(recorded: dict) -> str | None:
    """The instruction an evaluation's prompts carried: recorded since it is, else its evaluator's default (what
    every earlier evaluation used; `task.instruction` was not recorded then). None without an evaluator."""
    if "instruction" in recorded:
        return recorded["instruction"]
    evaluator = recorded.get("evaluator")
    return default_instruction(evaluator) if evaluator else None


def can_rescore(recorded: dict, evaluator: str, instruction: str) -> bool:
    """Whether an evaluation recorded as `recorded` (its results.json) can be scored under `evaluator` without
    sampling: both evaluators built in, the prompts asked the same way."""
    was = recorded.get("evaluator")
    return (
        was in BUILTIN_EVALUATORS
        and evaluator in BUILTIN_EVALUATORS
        and recorded_instruction(recorded) == instruction
        and recorded.get("mean_completion_tokens") is not None
    )


def rescore(folder: Path, evaluator: str) -> dict:
    """Score FOLDER's samples under `evaluator`, recompute its numbers and rewrite results.json and samples.jsonl
    (each whole, then renamed into place); returns the new results. Completion lengths are not in samples.jsonl
    and do not depend on scoring: the recorded mean stays."""
    recorded = json.loads((folder / RESULTS_FILE).read_text())
    scorer = load_evaluator(evaluator)
    records = [json.loads(line) for line in (folder / SAMPLES_FILE).read_text().splitlines() if line.strip()]
    outcomes = []
    for record in records:
        samples = [ScoredSample(record["prompt"], c, record["reference"]) for c in record["completions"]]
        record["rewards"] = [math.nan if r is None else r for r in scorer.score_batch(samples)]
        outcomes.append(
            ProblemOutcome(
                rewards=record["rewards"],
                tokens=[0] * len(samples),  # not recorded per sample; the mean is kept below
                truncated=record["truncated"],
                entropies=record["entropies"],
                answers=[final_answer(c) for c in record["completions"]],
            )
        )
    options = EvalOptions(**recorded["options"])
    results = {
        **recorded,
        **summarize(outcomes, options),
        "evaluator": evaluator,
        "instruction": recorded_instruction(recorded),
        "rescored_from": recorded.get("rescored_from") or recorded.get("evaluator"),
        "mean_completion_tokens": recorded["mean_completion_tokens"],
    }
    hacked = stated_wrong_result_rate(records, evaluator)
    if hacked is not None:
        results["stated_wrong_result_rate"] = hacked
    write_atomically(folder / SAMPLES_FILE, "".join(json.dumps(record) + "\n" for record in records))
    write_atomically(folder / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
    return results
