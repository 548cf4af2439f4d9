from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SamplingParams(_message.Message):
    __slots__ = ("temperature", "top_p", "max_new_tokens", "samples_per_prompt", "seed", "top_k", "min_p", "repetition_penalty", "stop")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    MAX_NEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    REPETITION_PENALTY_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_p: float
    max_new_tokens: int
    samples_per_prompt: int
    seed: int
    top_k: int
    min_p: float
    repetition_penalty: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., max_new_tokens: _Optional[int] = ..., samples_per_prompt: _Optional[int] = ..., seed: _Optional[int] = ..., top_k: _Optional[int] = ..., min_p: _Optional[float] = ..., repetition_penalty: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ...) -> None: ...

class Problem(_message.Message):
    __slots__ = ("prompt", "reference", "columns", "messages")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    reference: str
    columns: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, prompt: _Optional[str] = ..., reference: _Optional[str] = ..., columns: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class PromptBatch(_message.Message):
    __slots__ = ("iteration", "problems", "evaluator", "system_prompt", "plain_prompts", "chat_template_kwargs")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PLAIN_PROMPTS_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    problems: _containers.RepeatedCompositeFieldContainer[Problem]
    evaluator: str
    system_prompt: str
    plain_prompts: bool
    chat_template_kwargs: str
    def __init__(self, iteration: _Optional[int] = ..., problems: _Optional[_Iterable[_Union[Problem, _Mapping]]] = ..., evaluator: _Optional[str] = ..., system_prompt: _Optional[str] = ..., plain_prompts: _Optional[bool] = ..., chat_template_kwargs: _Optional[str] = ...) -> None: ...

class MemberTask(_message.Message):
    __slots__ = ("iteration", "member", "seed", "sign", "sigma", "sampling", "expected_step", "summary_only", "per_prompt_q8", "stochastic_rounding", "shard", "shards", "rank", "pass_at_k")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SIGN_FIELD_NUMBER: _ClassVar[int]
    SIGMA_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STEP_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_ONLY_FIELD_NUMBER: _ClassVar[int]
    PER_PROMPT_Q8_FIELD_NUMBER: _ClassVar[int]
    STOCHASTIC_ROUNDING_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PASS_AT_K_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    member: int
    seed: int
    sign: int
    sigma: float
    sampling: SamplingParams
    expected_step: int
    summary_only: bool
    per_prompt_q8: bool
    stochastic_rounding: bool
    shard: int
    shards: int
    rank: int
    pass_at_k: int
    def __init__(self, iteration: _Optional[int] = ..., member: _Optional[int] = ..., seed: _Optional[int] = ..., sign: _Optional[int] = ..., sigma: _Optional[float] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., expected_step: _Optional[int] = ..., summary_only: _Optional[bool] = ..., per_prompt_q8: _Optional[bool] = ..., stochastic_rounding: _Optional[bool] = ..., shard: _Optional[int] = ..., shards: _Optional[int] = ..., rank: _Optional[int] = ..., pass_at_k: _Optional[int] = ...) -> None: ...

class MemberTasks(_message.Message):
    __slots__ = ("tasks", "batched")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    BATCHED_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[MemberTask]
    batched: bool
    def __init__(self, tasks: _Optional[_Iterable[_Union[MemberTask, _Mapping]]] = ..., batched: _Optional[bool] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("batch", "task", "tasks")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    batch: PromptBatch
    task: MemberTask
    tasks: MemberTasks
    def __init__(self, batch: _Optional[_Union[PromptBatch, _Mapping]] = ..., task: _Optional[_Union[MemberTask, _Mapping]] = ..., tasks: _Optional[_Union[MemberTasks, _Mapping]] = ...) -> None: ...

class Timings(_message.Message):
    __slots__ = ("perturb_seconds", "generate_seconds", "score_seconds", "restore_seconds")
    PERTURB_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GENERATE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCORE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESTORE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    perturb_seconds: float
    generate_seconds: float
    score_seconds: float
    restore_seconds: float
    def __init__(self, perturb_seconds: _Optional[float] = ..., generate_seconds: _Optional[float] = ..., score_seconds: _Optional[float] = ..., restore_seconds: _Optional[float] = ...) -> None: ...

class MemberResult(_message.Message):
    __slots__ = ("iteration", "member", "rewards", "completion_tokens", "timings", "reward_mean", "prompts_scored", "total_completion_tokens", "prompt_rewards_q8", "truncated_answers")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    REWARD_MEAN_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_SCORED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_REWARDS_Q8_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    member: int
    rewards: _containers.RepeatedScalarFieldContainer[float]
    completion_tokens: _containers.RepeatedScalarFieldContainer[int]
    timings: Timings
    reward_mean: float
    prompts_scored: int
    total_completion_tokens: int
    prompt_rewards_q8: bytes
    truncated_answers: int
    def __init__(self, iteration: _Optional[int] = ..., member: _Optional[int] = ..., rewards: _Optional[_Iterable[float]] = ..., completion_tokens: _Optional[_Iterable[int]] = ..., timings: _Optional[_Union[Timings, _Mapping]] = ..., reward_mean: _Optional[float] = ..., prompts_scored: _Optional[int] = ..., total_completion_tokens: _Optional[int] = ..., prompt_rewards_q8: _Optional[bytes] = ..., truncated_answers: _Optional[int] = ...) -> None: ...

class MemberFailure(_message.Message):
    __slots__ = ("iteration", "member", "error")
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    member: int
    error: str
    def __init__(self, iteration: _Optional[int] = ..., member: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("result", "failure", "batch")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    result: MemberResult
    failure: MemberFailure
    batch: EvaluateResponses
    def __init__(self, result: _Optional[_Union[MemberResult, _Mapping]] = ..., failure: _Optional[_Union[MemberFailure, _Mapping]] = ..., batch: _Optional[_Union[EvaluateResponses, _Mapping]] = ...) -> None: ...

class EvaluateResponses(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[EvaluateResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[EvaluateResponse, _Mapping]]] = ...) -> None: ...

class SeedCoefficient(_message.Message):
    __slots__ = ("seed", "coeff")
    SEED_FIELD_NUMBER: _ClassVar[int]
    COEFF_FIELD_NUMBER: _ClassVar[int]
    seed: int
    coeff: float
    def __init__(self, seed: _Optional[int] = ..., coeff: _Optional[float] = ...) -> None: ...

class UpdateRequest(_message.Message):
    __slots__ = ("step", "terms", "rule", "params", "rank")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    STEP_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    step: int
    terms: _containers.RepeatedCompositeFieldContainer[SeedCoefficient]
    rule: str
    params: _containers.ScalarMap[str, float]
    rank: int
    def __init__(self, step: _Optional[int] = ..., terms: _Optional[_Iterable[_Union[SeedCoefficient, _Mapping]]] = ..., rule: _Optional[str] = ..., params: _Optional[_Mapping[str, float]] = ..., rank: _Optional[int] = ...) -> None: ...

class UpdateReply(_message.Message):
    __slots__ = ("step", "weights_fingerprint")
    STEP_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    step: int
    weights_fingerprint: str
    def __init__(self, step: _Optional[int] = ..., weights_fingerprint: _Optional[str] = ...) -> None: ...

class StateRequest(_message.Message):
    __slots__ = ("evaluator",)
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    def __init__(self, evaluator: _Optional[str] = ...) -> None: ...

class ServerState(_message.Message):
    __slots__ = ("step", "weights_fingerprint", "model", "backend", "device", "dtype", "parameters", "noise", "parent_fingerprint", "batches_members", "evaluator_problem", "lowrank_targets")
    STEP_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    NOISE_FIELD_NUMBER: _ClassVar[int]
    PARENT_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    BATCHES_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_PROBLEM_FIELD_NUMBER: _ClassVar[int]
    LOWRANK_TARGETS_FIELD_NUMBER: _ClassVar[int]
    step: int
    weights_fingerprint: str
    model: str
    backend: str
    device: str
    dtype: str
    parameters: int
    noise: str
    parent_fingerprint: str
    batches_members: bool
    evaluator_problem: str
    lowrank_targets: str
    def __init__(self, step: _Optional[int] = ..., weights_fingerprint: _Optional[str] = ..., model: _Optional[str] = ..., backend: _Optional[str] = ..., device: _Optional[str] = ..., dtype: _Optional[str] = ..., parameters: _Optional[int] = ..., noise: _Optional[str] = ..., parent_fingerprint: _Optional[str] = ..., batches_members: _Optional[bool] = ..., evaluator_problem: _Optional[str] = ..., lowrank_targets: _Optional[str] = ...) -> None: ...

class SampleRequest(_message.Message):
    __slots__ = ("problems", "evaluator", "sampling", "system_prompt", "return_entropy", "plain_prompts", "chat_template_kwargs")
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    RETURN_ENTROPY_FIELD_NUMBER: _ClassVar[int]
    PLAIN_PROMPTS_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_KWARGS_FIELD_NUMBER: _ClassVar[int]
    problems: _containers.RepeatedCompositeFieldContainer[Problem]
    evaluator: str
    sampling: SamplingParams
    system_prompt: str
    return_entropy: bool
    plain_prompts: bool
    chat_template_kwargs: str
    def __init__(self, problems: _Optional[_Iterable[_Union[Problem, _Mapping]]] = ..., evaluator: _Optional[str] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., system_prompt: _Optional[str] = ..., return_entropy: _Optional[bool] = ..., plain_prompts: _Optional[bool] = ..., chat_template_kwargs: _Optional[str] = ...) -> None: ...

class ProblemSamples(_message.Message):
    __slots__ = ("completions", "rewards", "completion_tokens", "truncated", "mean_token_entropy")
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    REWARDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    MEAN_TOKEN_ENTROPY_FIELD_NUMBER: _ClassVar[int]
    completions: _containers.RepeatedScalarFieldContainer[str]
    rewards: _containers.RepeatedScalarFieldContainer[float]
    completion_tokens: _containers.RepeatedScalarFieldContainer[int]
    truncated: _containers.RepeatedScalarFieldContainer[bool]
    mean_token_entropy: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, completions: _Optional[_Iterable[str]] = ..., rewards: _Optional[_Iterable[float]] = ..., completion_tokens: _Optional[_Iterable[int]] = ..., truncated: _Optional[_Iterable[bool]] = ..., mean_token_entropy: _Optional[_Iterable[float]] = ...) -> None: ...

class SampleReply(_message.Message):
    __slots__ = ("problems", "step")
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    problems: _containers.RepeatedCompositeFieldContainer[ProblemSamples]
    step: int
    def __init__(self, problems: _Optional[_Iterable[_Union[ProblemSamples, _Mapping]]] = ..., step: _Optional[int] = ...) -> None: ...
