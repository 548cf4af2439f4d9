"""A batch's problems as the server uses them: the prompts the backend generates from, and what the evaluator
scores against (the user message's text, the reference, the dataset columns and the conversation).

Prompts stay plain user messages, which every backend puts in the model's chat template itself, unless the
batch needs its own formatting: a conversation (TRL's conversational format), `plain_prompts` (no template,
for base models) or `chat_template_kwargs`. Those are formatted here once, when the batch arrives, so a
template that refuses them is an INVALID_ARGUMENT for the batch and never a failed member.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from seedcast.evaluators.base import ScoringInputs
from seedcast.inference_server.model_source import FormattedPrompt, chat_text
from seedcast.inference_server.validation import RequestError
from seedcast.proto import seedcast_pb2 as pb


@dataclass(frozen=True)
class ProblemInputs:
    """Per problem: the prompt to generate from, and the scoring inputs."""

    prompts: list[str]
    scoring: ScoringInputs

    def part(self, problems: slice) -> ProblemInputs:
        """The inputs of a slice of the problems (a member's prompt shard)."""
        return ProblemInputs(self.prompts[problems], self.scoring.part(problems))


def _messages(problem: pb.Problem) -> list[dict[str, str]]:
    return [{"role": message.role, "content": message.content} for message in problem.messages]


def _template_kwargs(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        kwargs = json.loads(text)
    except ValueError:
        kwargs = None
    if not isinstance(kwargs, Mapping):
        raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, "chat_template_kwargs must be a JSON object")
    return dict(kwargs)


def problem_inputs(message: pb.PromptBatch | pb.SampleRequest, tokenizer: Any) -> ProblemInputs:
    """The inputs of a checked batch or Sample request; `tokenizer` has the model's chat template (None: a
    backend without one, which generates from the text itself)."""
    problems = message.problems
    columns = [json.loads(p.columns) if p.columns else {} for p in problems]  # checked JSON objects
    scoring = ScoringInputs(
        texts=[p.prompt for p in problems],
        references=[p.reference for p in problems],
        columns=columns if any(columns) else None,
        messages=[tuple(_messages(p)) for p in problems] if any(p.messages for p in problems) else None,
    )
    own_format = message.plain_prompts or message.chat_template_kwargs or scoring.messages is not None
    if not own_format:
        return ProblemInputs([p.prompt for p in problems], scoring)
    kwargs = _template_kwargs(message.chat_template_kwargs)
    prompts = []
    for index, problem in enumerate(problems):
        user = _messages(problem) or problem.prompt
        try:
            text = chat_text(tokenizer, user, message.system_prompt, message.plain_prompts, kwargs)
        except Exception as error:  # the model's template (Jinja) refuses these messages or arguments
            raise RequestError(
                grpc.StatusCode.INVALID_ARGUMENT, f"problems[{index}]: the model's chat template refused it: {error}"
            ) from None
        prompts.append(FormattedPrompt(text))
    return ProblemInputs(prompts, scoring)
