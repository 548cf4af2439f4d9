"""The one table of tasks: for each dataset kind, one `Task` holding where its problems come from (a file's
fields, the hub, or a generator with its levels), which evaluator scores it, how its references are cleaned
and how held-out sets tell its problems apart.

Add a task here; nothing else holds these facts. A generated task is one module (its generator, evaluator and
instruction, as synthetic.py and countdown.py are) and one line here. The instruction follows the evaluator,
not the dataset, because it asks for the answer format that evaluator parses: `task.evaluator=gsm8k` on a
JSONL file gets the GSM8K instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from seedcast.evaluators.base import Problem
from seedcast.evaluators.countdown import COUNTDOWN_GENERATOR, COUNTDOWN_INSTRUCTION, countdown_key
from seedcast.evaluators.generator import Generator
from seedcast.evaluators.gsm8k import GSM8K_INSTRUCTION, gsm8k_reference
from seedcast.evaluators.math_answer import MATH_INSTRUCTION
from seedcast.evaluators.synthetic import SYNTHETIC_GENERATOR, SYNTHETIC_INSTRUCTION

FILE, HUB, GENERATED = "file", "hub", "generated"  # where a task's problems come from


@dataclass(frozen=True)
class Task:
    """What Seedcast knows about one dataset kind."""

    evaluator: str  # the evaluator spec that scores it unless task.evaluator says otherwise
    prompt_field: str = "problem"  # dotted field of the problem text in its records
    answer_field: str = "answer"  # dotted field of the reference answer
    # Turns the raw answer field into the reference the evaluator compares against (None: keep it).
    reference: Callable[[str], str | None] | None = None
    # When two problems are the same one, for held-out sets (None: the same prompt, and a held-out set may repeat
    # one, as the synthetic task's committed evaluations were made); with a key, a held-out set holds each once.
    problem_key: Callable[[Problem], str] | None = None
    source: str = FILE  # FILE: records of task.path; HUB: a hub dataset; GENERATED: `generator`
    generator: Generator | None = None  # the problems of a generated task, made offline

    def __post_init__(self) -> None:
        if (self.source == GENERATED) != (self.generator is not None):
            raise ValueError("a task is generated exactly when it has a generator")


TASKS: dict[str, Task] = {
    "gsm8k": Task("gsm8k", "question", "answer", reference=gsm8k_reference),
    "math500": Task("math"),
    "aime24": Task("math"),
    "deepscaler": Task("math"),
    "deepscaler-verl": Task("math", "prompt.0.content", "reward_model.ground_truth"),
    # Files in any layout (fields from task.prompt_field / task.answer_field).
    "jsonl": Task("math"),
    "json": Task("math"),
    "parquet": Task("math"),
    # Generated offline, no records.
    "synthetic": Task("synthetic", source=GENERATED, generator=SYNTHETIC_GENERATOR),
    # Countdown problems are the same up to the order of their numbers. Scored strictly: the expression and any
    # result the answer states must both be right (`41 + 39 = 969` scores 0). The lenient `countdown` evaluator,
    # which checks the expression alone and scored every committed Countdown run, stays by name.
    "countdown": Task("countdown-strict", problem_key=countdown_key, source=GENERATED, generator=COUNTDOWN_GENERATOR),
    # A Hugging Face hub dataset (task.path is its id), when the hub is reachable.
    "hf": Task("math", source=HUB),
}
DATASET_KINDS = tuple(TASKS)

# evaluator spec -> the instruction asking for the answer format it parses ("" for all others)
INSTRUCTIONS: dict[str, str] = {
    "synthetic": SYNTHETIC_INSTRUCTION,
    "gsm8k": GSM8K_INSTRUCTION,
    "math": MATH_INSTRUCTION,
    "countdown": COUNTDOWN_INSTRUCTION,
    "countdown-strict": COUNTDOWN_INSTRUCTION,
    # The format-only controls ask for the answer exactly as the task they control for does.
    "format-final-number": SYNTHETIC_INSTRUCTION,
    "format-countdown": COUNTDOWN_INSTRUCTION,
}


def default_evaluator(dataset: str) -> str:
    """The evaluator that scores a dataset kind (math for kinds this table does not know)."""
    task = TASKS.get(dataset)
    return task.evaluator if task else "math"


def problem_key(dataset: str) -> Callable[[Problem], str] | None:
    """How held-out sets of a dataset kind tell problems apart (None: by prompt)."""
    task = TASKS.get(dataset)
    return task.problem_key if task else None


def default_instruction(evaluator: str) -> str:
    """The instruction appended to problems scored by `evaluator`."""
    return INSTRUCTIONS.get(evaluator, "")
