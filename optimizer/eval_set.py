"""The fixed evaluation set of a run, shared by ES (`seedcast train`) and GRPO (`seedcast grpo`), so the
eval reward curves of both methods are measured on the same problems with the same prompts."""

from __future__ import annotations

import json

from seedcast.evaluators.base import Problem, ScoringInputs
from seedcast.evaluators.datasets import load_problems
from seedcast.evaluators.tasks import GENERATED, TASKS
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.es.seeds import derive_seed, minibatch_indices
from seedcast.proto import seedcast_pb2 as pb

EVAL_SEED_OFFSET = 1_000_003  # the evaluation set of a generated task is drawn from another stream


def prompt_text(problem: Problem, instruction: str) -> str:
    """The user message of a problem: its text, then the task's instruction."""
    return f"{problem.prompt}\n\n{instruction}" if instruction else problem.prompt


def prompt_messages(problem: Problem, instruction: str) -> list[dict[str, str]]:
    """A conversational problem's messages, the task's instruction after its last user message's text."""
    messages = [{"role": role, "content": content} for role, content in problem.messages]
    users = [index for index, message in enumerate(messages) if message["role"] == "user"]
    if instruction and users:
        messages[users[-1]]["content"] = prompt_text(problem, instruction)
    return messages


def model_prompt(problem: Problem, instruction: str) -> str | list[dict[str, str]]:
    """What the model is prompted with: the conversation, or the user message (chat_text's input)."""
    return prompt_messages(problem, instruction) if problem.messages else prompt_text(problem, instruction)


def wire_problem(problem: Problem, instruction: str) -> pb.Problem:
    """A problem as servers receive it: the user message (or the conversation), the reference and columns."""
    messages = [pb.ChatMessage(**message) for message in prompt_messages(problem, instruction)]
    return pb.Problem(
        prompt=prompt_text(problem, instruction),
        reference=problem.reference,
        columns=problem.columns,
        messages=messages,
    )


def eval_problems(config: TrainConfig, training_problems: list[Problem]) -> list[Problem]:
    """`config.eval_size` problems: freshly generated ones (synthetic, countdown), else a seeded sample of the
    training set."""
    task = config.task
    if TASKS[task.dataset].source == GENERATED:
        return load_problems(task.dataset_spec(config.seed + EVAL_SEED_OFFSET))[: config.eval_size]
    indices = minibatch_indices(derive_seed(config.seed, "eval"), 0, len(training_problems), config.eval_size)
    return [training_problems[i] for i in indices]


def scoring_inputs(problems: list[Problem], instruction: str) -> ScoringInputs:
    """What completions of `problems` are scored against, as servers build it from the wire (for GRPO, which
    scores in this process)."""
    columns = [json.loads(p.columns) if p.columns else {} for p in problems]
    messages = [tuple(prompt_messages(p, instruction)) for p in problems]
    return ScoringInputs(
        texts=[prompt_text(p, instruction) for p in problems],
        references=[p.reference for p in problems],
        columns=columns if any(columns) else None,
        messages=messages if any(messages) else None,
    )
