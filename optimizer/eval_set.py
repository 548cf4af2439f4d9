"""The fixed evaluation set of a run, shared by ES (`seedcast train`) and GRPO (`seedcast grpo`), so the
eval reward curves of both methods are measured on the same problems with the same prompts."""

from __future__ import annotations

from seedcast.evaluators.base import Problem
from seedcast.evaluators.datasets import load_problems
from seedcast.evaluators.tasks import GENERATED, TASKS
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.es.seeds import derive_seed, minibatch_indices

EVAL_SEED_OFFSET = 1_000_003  # the evaluation set of a generated task is drawn from another stream


def prompt_text(problem: Problem, instruction: str) -> str:
    """The user message of a problem: its text, then the task's instruction."""
    return f"{problem.prompt}\n\n{instruction}" if instruction else problem.prompt


def eval_problems(config: TrainConfig, training_problems: list[Problem]) -> list[Problem]:
    """`config.eval_size` problems: freshly generated ones (synthetic, countdown), else a seeded sample of the
    training set."""
    task = config.task
    if TASKS[task.dataset].source == GENERATED:
        return load_problems(task.dataset_spec(config.seed + EVAL_SEED_OFFSET))[: config.eval_size]
    indices = minibatch_indices(derive_seed(config.seed, "eval"), 0, len(training_problems), config.eval_size)
    return [training_problems[i] for i in indices]
