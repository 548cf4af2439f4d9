"""Request validation: every field checked before anything touches the weights.

Each check raises RequestError with the gRPC status to answer and a message naming the field and
the accepted range, so a client sees exactly what to fix.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import grpc

from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.noise.update_rules import PLAIN_RULE, rule_problems
from seedcast.inference_server.remote_allowance import REMOTE, remote_allowance_problem
from seedcast.proto import seedcast_pb2 as pb

WHOLE_BATCH = 0  # MemberTask.shards of a task that covers the whole batch: its one encoding (proto3's default)


class RequestError(Exception):
    """A request the server refuses; carries the status code to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Upper bounds on what one request may ask of the server."""

    max_prompts: int = 1024
    max_tasks_per_message: int = 256
    max_prompt_chars: int = 32_768
    max_system_prompt_chars: int = 32_768  # prepended to every prompt of the request
    max_evaluator_chars: int = 512
    max_new_tokens: int = 8192
    max_samples_per_prompt: int = 256
    max_stop_strings: int = 16
    max_messages: int = 256  # a conversational prompt's messages
    max_role_chars: int = 64
    max_template_kwargs_chars: int = 4096  # chat_template_kwargs, a JSON object
    max_stop_chars: int = 256  # each stop string
    max_update_terms: int = 65_536
    max_rule_chars: int = 64  # an update rule's name and each parameter's name (errors quote them)
    max_rule_params: int = 16
    max_sync_steps: int = 1_000_000
    max_sync_terms: int = 1_000_000  # over all steps of one Sync call: what one stream may make the server buffer
    max_sigma: float = 1.0
    max_rank: int = 256  # a low-rank member's rank; its factors take (rows + columns)·rank floats per weight
    # Far above any ES step (α·F/(N·σ)), far below float32 overflow when multiplied by the noise.
    max_abs_coefficient: float = 1e6
    # Evaluator specs a request may name beyond the built-ins and installed `seedcast.evaluators`
    # plugins: exact specs, or prefixes ending in ":" or "." (e.g. "remote:", "mypkg."). A client
    # could otherwise make the server import and call any function. None allows every spec.
    allowed_evaluators: tuple[str, ...] | None = ()

    def evaluator_allowed(self, spec: str) -> bool:
        """Built-ins and installed plugins always; anything else only when allowed."""
        from seedcast.evaluators.registry import BUILTIN_EVALUATORS, installed_plugins

        if self.allowed_evaluators is None or spec in BUILTIN_EVALUATORS or spec in installed_plugins():
            return True
        if spec.startswith(REMOTE):  # only endpoints the operator named, host included (remote_allowance_problem)
            allowances = [a for a in self.allowed_evaluators if remote_allowance_problem(a) is None]
            return any(
                spec == allowed or (allowed.endswith("/") and spec.startswith(allowed)) for allowed in allowances
            )
        return any(
            spec == allowed or (allowed.endswith((":", ".")) and spec.startswith(allowed))
            for allowed in self.allowed_evaluators
        )


def _invalid(message: str) -> RequestError:
    return RequestError(grpc.StatusCode.INVALID_ARGUMENT, message)


def check_finite(value: float, field: str) -> None:
    """Refuse NaN and infinities."""
    if not math.isfinite(value):
        raise _invalid(f"{field} must be finite, got {value}")


def check_sigma(sigma: float, limits: Limits, field: str = "sigma") -> None:
    """sigma must be finite and in (0, max_sigma]."""
    check_finite(sigma, field)
    if not 0.0 < sigma <= limits.max_sigma:
        raise _invalid(f"{field} must be in (0, {limits.max_sigma}], got {sigma}")


# Every string and repeated field of every request message, and the Limits field that bounds it:
# tests/inference_server/test_hostile_input.py walks the proto's descriptors, so a new field without a bound
# fails there.
FIELD_BOUNDS: dict[str, str] = {
    "PromptBatch.problems": "max_prompts",
    "PromptBatch.evaluator": "max_evaluator_chars",
    "PromptBatch.system_prompt": "max_system_prompt_chars",
    "Problem.prompt": "max_prompt_chars",
    "Problem.reference": "max_prompt_chars",
    "Problem.columns": "max_prompt_chars",
    "MemberTasks.tasks": "max_tasks_per_message",
    "UpdateRequest.terms": "max_update_terms",
    "UpdateRequest.rule": "max_rule_chars",
    "UpdateRequest.params": "max_rule_params",
    "ParamsEntry.key": "max_rule_chars",
    "SampleRequest.problems": "max_prompts",
    "SampleRequest.evaluator": "max_evaluator_chars",
    "SampleRequest.system_prompt": "max_system_prompt_chars",
    "StateRequest.evaluator": "max_evaluator_chars",
    "SamplingParams.stop": "max_stop_strings",
    "Problem.messages": "max_messages",
    "ChatMessage.role": "max_role_chars",
    "ChatMessage.content": "max_prompt_chars",
    "PromptBatch.chat_template_kwargs": "max_template_kwargs_chars",
    "SampleRequest.chat_template_kwargs": "max_template_kwargs_chars",
}


def check_request_texts(message: pb.PromptBatch | pb.SampleRequest, limits: Limits) -> None:
    """The problems, the evaluator spec and the system prompt of a batch or a Sample request."""
    check_problems(message.problems, limits)
    check_evaluator_length(message.evaluator, limits)
    if len(message.chat_template_kwargs) > limits.max_template_kwargs_chars:
        raise _invalid(f"chat_template_kwargs is longer than {limits.max_template_kwargs_chars} characters")
    if len(message.system_prompt) > limits.max_system_prompt_chars:
        raise _invalid(f"system_prompt is longer than {limits.max_system_prompt_chars} characters")


def check_evaluator_length(spec: str, limits: Limits) -> None:
    """An evaluator spec within max_evaluator_chars (a batch's, a Sample's, or one a state query asks about)."""
    if len(spec) > limits.max_evaluator_chars:
        raise _invalid(f"evaluator is longer than {limits.max_evaluator_chars} characters")


def check_problems(problems, limits: Limits) -> None:
    """Between 1 and max_prompts problems, each prompt non-empty and within max_prompt_chars."""
    if not problems:
        raise _invalid("problems must not be empty")
    if len(problems) > limits.max_prompts:
        raise _invalid(f"at most {limits.max_prompts} problems per request, got {len(problems)}")
    for index, problem in enumerate(problems):
        if not problem.prompt and not problem.messages:
            raise _invalid(f"problems[{index}] has neither a prompt nor messages")
        check_messages(problem.messages, index, limits)
        texts = (problem.prompt, problem.reference, problem.columns)
        if any(len(text) > limits.max_prompt_chars for text in texts):
            raise _invalid(f"problems[{index}] is longer than {limits.max_prompt_chars} characters")
        if problem.columns and not isinstance(_json_object(problem.columns), dict):
            raise _invalid(f"problems[{index}].columns must be a JSON object of the problem's dataset columns")


def check_messages(messages, index: int, limits: Limits) -> None:
    """A conversation of at most max_messages messages, each with a bounded role and content."""
    if len(messages) > limits.max_messages:
        raise _invalid(f"problems[{index}] has {len(messages)} messages, more than {limits.max_messages}")
    for number, message in enumerate(messages):
        if not 0 < len(message.role) <= limits.max_role_chars or len(message.content) > limits.max_prompt_chars:
            raise _invalid(
                f"problems[{index}].messages[{number}] needs a role of 1 to {limits.max_role_chars} characters and "
                f"content of at most {limits.max_prompt_chars}"
            )


def _json_object(text: str) -> object:
    """The JSON value of `text`, or None when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def sampling_from_proto(message: pb.SamplingParams, limits: Limits) -> Sampling:
    """Validated Sampling from its wire form."""
    check_finite(message.temperature, "sampling.temperature")
    check_finite(message.top_p, "sampling.top_p")
    if message.temperature < 0:
        raise _invalid(f"sampling.temperature must be >= 0, got {message.temperature}")
    if not 0.0 < message.top_p <= 1.0:
        raise _invalid(f"sampling.top_p must be in (0, 1], got {message.top_p}")
    if not 1 <= message.max_new_tokens <= limits.max_new_tokens:
        raise _invalid(f"sampling.max_new_tokens must be in [1, {limits.max_new_tokens}], got {message.max_new_tokens}")
    if not 1 <= message.samples_per_prompt <= limits.max_samples_per_prompt:
        raise _invalid(
            f"sampling.samples_per_prompt must be in [1, {limits.max_samples_per_prompt}], "
            f"got {message.samples_per_prompt}"
        )
    check_sampling_filters(message, limits)
    return Sampling(
        temperature=message.temperature,
        top_p=message.top_p,
        max_new_tokens=message.max_new_tokens,
        samples_per_prompt=message.samples_per_prompt,
        seed=message.seed,
        top_k=message.top_k,
        min_p=message.min_p,
        repetition_penalty=message.repetition_penalty or 1.0,  # 0: the field was not set
        stop=tuple(message.stop),
    )


def check_sampling_filters(message: pb.SamplingParams, limits: Limits) -> None:
    """min_p in [0, 1], a finite repetition penalty >= 0 (0 = unset), and a bounded list of non-empty stop
    strings."""
    check_finite(message.min_p, "sampling.min_p")
    check_finite(message.repetition_penalty, "sampling.repetition_penalty")
    if not 0.0 <= message.min_p <= 1.0:
        raise _invalid(f"sampling.min_p must be in [0, 1], got {message.min_p}")
    if message.repetition_penalty < 0:
        raise _invalid(f"sampling.repetition_penalty must be > 0 (0 means unset), got {message.repetition_penalty}")
    if len(message.stop) > limits.max_stop_strings:
        raise _invalid(f"at most {limits.max_stop_strings} sampling.stop strings, got {len(message.stop)}")
    for index, text in enumerate(message.stop):
        if not 0 < len(text) <= limits.max_stop_chars:
            raise _invalid(f"sampling.stop[{index}] must have 1 to {limits.max_stop_chars} characters")


def check_task(task: pb.MemberTask, batch: pb.PromptBatch | None, step: int, limits: Limits) -> Sampling:
    """A member task must follow a batch of the same iteration, at the server's step."""
    if batch is None:
        raise RequestError(grpc.StatusCode.FAILED_PRECONDITION, "a MemberTask arrived before any PromptBatch")
    if task.iteration != batch.iteration:
        raise RequestError(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"task for iteration {task.iteration} but the current batch is iteration {batch.iteration}",
        )
    if task.expected_step != step:
        raise RequestError(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"task expects step {task.expected_step} but the server is at step {step}; sync updates first",
        )
    if task.sign not in (1, -1):
        raise _invalid(f"sign must be +1 or -1, got {task.sign}")
    if task.shards == 1:
        raise _invalid(f"shards = 1 would be the whole batch, which is written shards = {WHOLE_BATCH}")
    if task.shards > len(batch.problems) or task.shard >= max(1, task.shards):
        raise _invalid(
            f"shard {task.shard} of {task.shards} does not fit a batch of {len(batch.problems)} prompts "
            f"(need shard < shards <= prompts; {WHOLE_BATCH} shards = the whole batch)"
        )
    check_sigma(task.sigma, limits)
    check_rank(task.rank, limits)
    sampling = sampling_from_proto(task.sampling, limits)
    if task.pass_at_k > sampling.samples_per_prompt:
        raise _invalid(
            f"pass_at_k = {task.pass_at_k} needs at least that many samples per prompt, but "
            f"sampling.samples_per_prompt is {sampling.samples_per_prompt}"
        )
    return sampling


def check_rank(rank: int, limits: Limits) -> None:
    """A perturbation rank is 0 (full rank) or a low rank up to the limit."""
    if rank > limits.max_rank:
        raise _invalid(f"rank must be 0 (full rank) or 1..{limits.max_rank}, got {rank}")


def shard_slice(task: pb.MemberTask, prompts: int) -> slice:
    """The prompts a task covers: its shard's contiguous slice, or all of them (WHOLE_BATCH)."""
    shards = 1 if task.shards == WHOLE_BATCH else task.shards
    return slice(task.shard * prompts // shards, (task.shard + 1) * prompts // shards)


@dataclass(frozen=True)
class CheckedUpdate:
    """An update request that passed `check_update`: what a backend's apply_update takes."""

    terms: list[tuple[int, float]]
    rule: str
    params: dict[str, float]
    rank: int = 0


def check_update(request: pb.UpdateRequest, step: int, limits: Limits) -> CheckedUpdate:
    """An update must be the next step, with finite coefficients and an update rule this server applies with
    valid parameters (noise/update_rules.py)."""
    if request.step != step + 1:
        raise RequestError(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"update step {request.step} does not follow the server's step {step}; send step {step + 1}",
        )
    if len(request.terms) > limits.max_update_terms:
        raise _invalid(f"at most {limits.max_update_terms} terms per update, got {len(request.terms)}")
    names = [request.rule, *request.params]
    if len(request.params) > limits.max_rule_params or max(map(len, names)) > limits.max_rule_chars:
        raise _invalid(
            f"an update rule has at most {limits.max_rule_params} parameters, and it and each parameter a name "
            f"of at most {limits.max_rule_chars} characters"
        )
    problems = rule_problems(request.rule, request.params)
    if problems:
        raise _invalid("; ".join(problems))
    check_rank(request.rank, limits)
    for index, term in enumerate(request.terms):
        check_finite(term.coeff, f"terms[{index}].coeff")
        if abs(term.coeff) > limits.max_abs_coefficient:
            raise _invalid(f"terms[{index}].coeff = {term.coeff} exceeds ±{limits.max_abs_coefficient:g}")
    terms = [(term.seed, term.coeff) for term in request.terms]
    return CheckedUpdate(terms=terms, rule=request.rule or PLAIN_RULE, params=dict(request.params), rank=request.rank)


def check_batched(tasks: list[pb.MemberTask], batches_members: bool) -> None:
    """Members batched together (MemberTasks.batched) share one low rank, the whole batch, the sampling settings
    (seeds apart) and pass_at_k, and need no stochastic rounding, on a server that batches members."""
    if not batches_members:
        raise RequestError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "this server does not generate members in batches (its GetState says batches_members = false); "
            "send them one at a time",
        )
    if len({task.rank for task in tasks}) != 1 or tasks[0].rank == 0:
        raise _invalid(f"batched members must share one rank >= 1, got ranks {sorted({t.rank for t in tasks})}")
    if any(task.shards != WHOLE_BATCH for task in tasks):
        raise _invalid("batched members cover the whole prompt batch (shards = 0)")
    if any(task.stochastic_rounding for task in tasks):
        raise _invalid("batched members are never rounded to the inference dtype: stochastic_rounding must be off")
    if len({task.pass_at_k for task in tasks}) != 1:
        raise _invalid("batched members must share pass_at_k")
    settings = {_shared_sampling(task.sampling) for task in tasks}
    if len(settings) != 1:
        raise _invalid("batched members must share their sampling settings (all but the seed)")


def _shared_sampling(sampling: pb.SamplingParams) -> bytes:
    """A member's sampling settings without its seed: what every member of one batch must share."""
    shared = pb.SamplingParams()
    shared.CopyFrom(sampling)
    shared.seed = 0
    return shared.SerializeToString(deterministic=True)
