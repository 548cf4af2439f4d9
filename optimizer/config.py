"""The training configuration: one pydantic model per component, every field documented.

Configs come from YAML files (`configs/*.yaml`) plus `key=value` overrides on the command line
(`es.sigma=0.002 iterations=20`). Validation reports every problem at once, each with the key
and what to set, before anything starts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from seedcast.evaluators.countdown import LEVELS as COUNTDOWN_LEVELS
from seedcast.evaluators.datasets import DatasetSpec
from seedcast.evaluators.synthetic import LEVELS
from seedcast.evaluators.tasks import DATASET_KINDS, GENERATED, TASKS, default_evaluator, default_instruction
from seedcast.evaluators.trl_rewards import PREFIX as TRL_PREFIX
from seedcast.evaluators.trl_rewards import RewardSpecError, format_spec, parse_spec
from seedcast.optimizer.config_section import ConfigError as ConfigError  # re-exported: where callers look
from seedcast.optimizer.config_section import Section
from seedcast.optimizer.es_config import ESConfig
from seedcast.optimizer.fleet.discovery import is_discovered, name_and_port
from seedcast.optimizer.fleet.launcher_names import LAUNCHERS
from seedcast.optimizer.grpo_config import GRPOConfig as GRPOConfig  # re-exported
from seedcast.optimizer.model_config import ModelConfig as ModelConfig  # re-exported
from seedcast.optimizer.ray_config import RayConfig, ray_launcher_problems
from seedcast.optimizer.sampling_config import SamplingConfig as SamplingConfig  # re-exported
from seedcast.optimizer.tracker_names import ReportTo
from seedcast.proto.choices import one_of
from seedcast.proto.transport import plaintext_allowed, split_address

LOCAL_DEVICE = re.compile(r"cpu|cuda(:\d+)?")  # what fleet.local_devices may name


class TaskConfig(Section):
    """The problems, how they are asked, and how answers are scored."""

    dataset: str = Field("synthetic", description=f"Dataset kind: {', '.join(DATASET_KINDS)}.")
    path: str | None = Field(None, description="Data file (file kinds) or hub id (hf).")
    split: str = Field("train", description="Split for the hf kind.")
    prompt_field: str | None = Field(None, description="Dotted field of the problem text (jsonl/json/parquet).")
    answer_field: str | None = Field(None, description="Dotted field of the reference answer.")
    limit: int | None = Field(None, ge=1, description="Use only the first N problems.")
    evaluator: str | None = Field(None, description="Evaluator spec; default follows the dataset.")
    reward_funcs: list[str] = Field(
        default_factory=list,
        description="Reward functions in TRL's convention, f(prompts, completions, **columns) -> list[float], as "
        "module:function; any scale; the problem's other dataset columns are passed to them (instead of evaluator).",
    )
    reward_weights: list[float] | None = Field(
        None, description="Weights of reward_funcs in their sum, as TRL's reward_weights; null = 1 each."
    )
    instruction: str | None = Field(None, description="Text appended to every problem; default follows the evaluator.")
    system_prompt: str = Field("", description="System message; empty keeps the chat template's default.")
    chat_template: bool = Field(
        True, description="Prompt through the model's own chat template; false = the text as it is (base models)."
    )
    chat_template_kwargs: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, description="Extra keyword arguments of the chat template, e.g. {enable_thinking: false}."
    )
    synthetic_difficulty: int = Field(2, description=f"Synthetic task level, one of {sorted(LEVELS)}.")
    synthetic_size: int = Field(
        2000, ge=1, description="Number of generated problems (synthetic, countdown) to draw batches from."
    )
    countdown_difficulty: int = Field(
        1,
        description="Countdown level; the bundled model's base pass@16 at T = 1 is 0.27 on level 1 and on "
        "level 8 (docs/es-options.md), and only level 8 has problems no training seed draws, to hold out; "
        f"one of {sorted(COUNTDOWN_LEVELS)}: "
        + ", ".join(f"{level}: {n} numbers up to {top}" for level, (n, top) in COUNTDOWN_LEVELS.items())
        + ".",
    )

    @model_validator(mode="after")
    def _check(self) -> TaskConfig:
        problems = []
        if self.dataset not in TASKS:
            problems.append(f"task.dataset: unknown kind {self.dataset!r}; set one of {', '.join(TASKS)}")
        elif TASKS[self.dataset].source != GENERATED and not self.path:
            problems.append(f"task.path: dataset {self.dataset!r} needs a path (a data file, or a hub id for hf)")
        problems.extend(self._reward_problems())
        for task in TASKS.values():  # every level setting must be valid, whichever task the run uses
            if task.generator is not None:
                problems.append(task.generator.level_problem(getattr(self, task.generator.level_setting)))
        problems = [problem for problem in problems if problem]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _reward_problems(self) -> list[str]:
        if not self.reward_funcs:
            return ["task.reward_weights: set task.reward_funcs too"] if self.reward_weights is not None else []
        problems = []
        if self.evaluator:
            problems.append("task.reward_funcs and task.evaluator both name how to score; set one of them")
        if self.reward_weights is not None and len(self.reward_weights) != len(self.reward_funcs):
            problems.append(f"task.reward_weights needs one weight per reward function ({len(self.reward_funcs)})")
        else:
            try:
                parse_spec(self.evaluator_spec())
            except RewardSpecError as error:
                problems.append(f"task.reward_funcs: {error}")
        return problems

    def evaluator_spec(self) -> str:
        """The evaluator to score with: the reward functions' `trl:` spec, an explicit one, else the dataset's."""
        if self.reward_funcs:
            weights = self.reward_weights or [1.0] * len(self.reward_funcs)
            return format_spec(list(zip(self.reward_funcs, weights, strict=True)))
        return self.evaluator or default_evaluator(self.dataset)

    def prompt_format(self) -> dict[str, str | bool]:
        """How servers turn problems into prompts: the PromptBatch / SampleRequest fields."""
        kwargs = json.dumps(self.chat_template_kwargs, sort_keys=True) if self.chat_template_kwargs else ""
        return {
            "system_prompt": self.system_prompt,
            "plain_prompts": not self.chat_template,
            "chat_template_kwargs": kwargs,
        }

    def instruction_text(self) -> str:
        """The instruction appended to each problem."""
        return self.instruction if self.instruction is not None else default_instruction(self.evaluator_spec())

    def dataset_spec(self, seed: int) -> DatasetSpec:
        """The loader's view of this section."""
        return DatasetSpec(
            kind=self.dataset,
            path=self.path,
            split=self.split,
            prompt_field=self.prompt_field,
            answer_field=self.answer_field,
            limit=self.limit,
            synthetic_size=self.synthetic_size,
            synthetic_difficulty=self.synthetic_difficulty,
            synthetic_seed=seed,
            countdown_difficulty=self.countdown_difficulty,
            keep_columns=self.evaluator_spec().startswith(TRL_PREFIX),
        )


class FleetConfig(Section):
    """Which inference servers do the work."""

    servers: list[str] = Field(
        default_factory=list,
        description="Running servers as host:port; dns:///NAME:PORT stands for every address NAME resolves to "
        "(a Kubernetes headless Service), resolved again before every iteration.",
    )
    servers_file: str | None = Field(
        None,
        description="File of host:port lines, re-read before every iteration: "
        "servers added to it join the run after a Sync.",
    )
    local: int = Field(
        1,
        ge=0,
        le=64,
        description="Servers this run starts (`--local N`): processes on this machine, or Ray actors with "
        "fleet.launcher=ray.",
    )
    launcher: Annotated[str, one_of(LAUNCHERS, "launcher")] = Field(
        "local",
        description="What starts the fleet.local servers: "
        + "; ".join(f"{name} = {what}" for name, what in LAUNCHERS.items())
        + ".",
    )
    ray: RayConfig = Field(default_factory=RayConfig, description="The Ray launcher's options (fleet.launcher=ray).")
    threads_per_server: int | None = Field(
        None, ge=1, description="Torch threads per local server; default: cores / local."
    )
    local_devices: list[str] | Literal["auto"] | None = Field(
        None,
        description="Where the servers fleet.local starts run: server i on entry i modulo the list, e.g. "
        "[cuda:0, cuda:1] (a vllm server then sees only its GPU through CUDA_VISIBLE_DEVICES); auto: one server "
        "per visible GPU in turn (model.device when none is visible). Default: model.device for every server.",
    )
    connect_timeout_seconds: float = Field(30.0, gt=0, description="How long to wait for a server to answer.")
    start_timeout_seconds: float = Field(600.0, gt=0, description="How long a local server may take to load.")
    pair_cache: bool | Literal["auto"] = Field(
        "auto",
        description="Local servers keep a mirrored member's partner weights (`seedcast serve --pair-cache`): "
        "one noise draw per pair, one more weights copy; auto: on for CPU hf servers with the memory.",
    )
    local_metrics_port: int | None = Field(
        None, ge=1, le=65535, description="Local server I serves Prometheus metrics on this port + I."
    )
    prompt_shards: int = Field(
        1,
        ge=1,
        le=256,
        description="Cut each member's prompts into this many fixed slices, each a unit of work, so servers that "
        "finish early take slices of members still running (the iteration's tail shrinks); part of the run. "
        "When the fleet's shape keeps under 95% of the servers busy, `seedcast train` names an S that allows 97%.",
    )
    members_per_batch: int = Field(
        1,
        ge=1,
        le=256,
        description="Low-rank members (es.perturbation=lowrank) a server generates together in one batch of "
        "members_per_batch × batch_size sequences, each carrying its member's perturbation as a correction to "
        "the shared weights; the population is cut into fixed groups of this many, so a member's batch mates "
        "never depend on the fleet. 1 = one member at a time. Needs servers that batch members: hf, or vllm with "
        "es.lowrank_targets=linear (members as LoRA adapters; remote ones started with --batch-members G).",
    )
    member_deadline_seconds: float | None = Field(
        900.0,
        gt=0,
        description="A server that does not answer a member in this time is dropped and the member "
        "reassigned (null: wait forever).",
    )
    quorum: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Close an iteration once this fraction of members returned and iteration_deadline_seconds passed.",
    )
    iteration_deadline_seconds: float | None = Field(None, gt=0, description="See fleet.quorum.")
    rejoin_timeout_seconds: float = Field(
        2.0,
        gt=0,
        description="Per iteration, how long to wait for a dropped or restarted server to answer before it rejoins.",
    )
    tls_ca: str | None = Field(None, description="PEM CA bundle that signed the servers' certificates; turns on TLS.")
    tls_cert: str | None = Field(None, description="PEM client certificate for servers that require mutual TLS.")
    tls_key: str | None = Field(None, description="PEM private key of fleet.tls_cert.")
    tls_server_name: str | None = Field(None, description="Name in the servers' certificates, if not the host.")
    token_file: str | None = Field(None, description="File with the bearer token servers require (local ones too).")
    insecure: bool = Field(False, description="Allow plaintext gRPC to servers that are not on loopback.")

    @model_validator(mode="after")
    def _check(self) -> FleetConfig:
        problems = []
        if not self.servers and self.local == 0 and not self.servers_file:
            problems.append("fleet: no servers; set fleet.servers (host:port,...), fleet.servers_file or fleet.local")
        if self.servers_file and not Path(self.servers_file).expanduser().is_file():
            problems.append(f"fleet.servers_file: file {self.servers_file} does not exist")
        for address in self.servers:
            try:
                host, _ = name_and_port(address) if is_discovered(address) else split_address(address)
            except ValueError as error:
                problems.append(f"fleet.servers: {error}")
                continue
            if not self.tls_ca and not plaintext_allowed(host, self.insecure):
                problems.append(
                    f"fleet.servers: {address} is not on loopback; set fleet.tls_ca to talk TLS to it, or "
                    "fleet.insecure=true on a network you trust"
                )
        if isinstance(self.local_devices, list):
            if not self.local_devices:
                problems.append("fleet.local_devices: an empty list; name devices (cuda:0, ...), auto, or leave it out")
            problems += [
                f"fleet.local_devices: {device!r} is not cpu, cuda or cuda:N"
                for device in self.local_devices
                if not LOCAL_DEVICE.fullmatch(device)
            ]
        if bool(self.tls_cert) != bool(self.tls_key):
            problems.append("fleet.tls_cert and fleet.tls_key go together: set both or neither")
        if self.launcher == "ray":
            problems += ray_launcher_problems(self)
        if (self.quorum is None) != (self.iteration_deadline_seconds is None):
            problems.append("fleet.quorum and fleet.iteration_deadline_seconds go together: set both or neither")
        if self.tls_cert and not self.tls_ca:
            problems.append("fleet.tls_cert needs TLS: set fleet.tls_ca too")
        for name in ("tls_ca", "tls_cert", "tls_key", "token_file"):
            path = getattr(self, name)
            if path and not Path(path).expanduser().is_file():
                problems.append(f"fleet.{name}: file {path} does not exist")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class TrainConfig(Section):
    """A training run (ES, or the GRPO baseline). Every field can be set in YAML or as key=value."""

    seed: int = Field(0, ge=0, description="Run seed: member seeds, minibatches and sampling derive from it.")
    iterations: int = Field(10, ge=1, description="ES iterations (= update steps).")
    batch_size: int = Field(32, ge=1, description="Problems per iteration, shared by all members.")
    eval_every: int = Field(5, ge=0, description="Score the unperturbed weights every N iterations (0 = never).")
    eval_size: int = Field(96, ge=1, description="Problems in that fixed evaluation set (greedy, one sample each).")
    metrics_port: int | None = Field(None, ge=0, le=65535, description="Serve the optimizer's Prometheus metrics here.")
    stop_after_idle_iterations: int = Field(
        3,
        ge=0,
        description="Stop with an error after this many iterations in a row in which every member failed or no "
        "update was applied (all members scored alike); 0 = never.",
    )
    report_to: ReportTo = Field(
        default_factory=list,
        description="Experiment trackers for the per-step record: tensorboard, wandb, both "
        "(tensorboard,wandb) or none. W&B runs offline without credentials.",
    )
    project: str | None = Field(
        None, description="The W&B project the run logs to; null = $WANDB_PROJECT, else seedcast."
    )
    run_name: str | None = Field(None, description="The run's name in the trackers; null = the run directory's name.")
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    es: ESConfig = Field(default_factory=ESConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)

    @model_validator(mode="after")
    def _check_shards(self) -> TrainConfig:
        if self.fleet.prompt_shards > self.batch_size:
            raise ValueError(
                f"fleet.prompt_shards ({self.fleet.prompt_shards}) must be at most batch_size ({self.batch_size}): "
                "every shard needs a prompt"
            )
        return self

    @model_validator(mode="after")
    def _check_reward_scale(self) -> TrainConfig:
        if self.es.fitness == "per_prompt" and self.task.evaluator_spec().startswith(TRL_PREFIX):
            raise ValueError(
                "es.fitness=per_prompt sends each prompt's reward as one byte for rewards in [0, 1], but reward "
                "functions in TRL's convention have any scale; use es.fitness=mean (a member's mean reward, any scale)"
            )
        return self

    @model_validator(mode="after")
    def _check_member_batches(self) -> TrainConfig:
        if self.fleet.members_per_batch == 1:
            return self
        problems = []
        if self.es.perturbation != "lowrank":
            problems.append("set es.perturbation=lowrank: only low-rank members share a batch")
        if self.fleet.prompt_shards > 1:
            problems.append("set fleet.prompt_shards=1: batched members cover the whole prompt batch")
        if self.es.rounding != "nearest":
            problems.append("set es.rounding=nearest: batched members' perturbations are never rounded at all")
        if self.model.backend == "vllm" and self.es.lowrank_targets != "linear":
            problems.append(
                "set es.lowrank_targets=linear: vllm servers batch members as LoRA adapters, which carry "
                "the projection weights only"
            )
        if problems:
            raise ValueError(f"fleet.members_per_batch={self.fleet.members_per_batch} needs: {'; '.join(problems)}")
        return self

    @model_validator(mode="after")
    def _check_pass_at_k(self) -> TrainConfig:
        es, sampling, problems = self.es, self.sampling, []
        if es.fitness != "pass_at_k":
            if es.fitness_k != 1:
                problems.append("es.fitness_k applies to es.fitness=pass_at_k only")
        else:
            if sampling.samples_per_prompt < es.fitness_k:
                problems.append(
                    f"set sampling.samples_per_prompt >= es.fitness_k ({es.fitness_k}): pass@k is estimated from "
                    "at least k samples per prompt"
                )
            if sampling.temperature == 0:
                problems.append("set sampling.temperature > 0: greedy samples are all alike, so pass@k = pass@1")
            if self.task.evaluator_spec().startswith(TRL_PREFIX):
                problems.append("use an evaluator with rewards 0 or 1: a sample passes when its reward is 1")
        if problems:
            raise ValueError(f"es.fitness={es.fitness}: {'; '.join(problems)}")
        return self

    @model_validator(mode="after")
    def _check_gpu_groups(self) -> TrainConfig:
        size, devices = self.model.gpus_per_server, self.fleet.local_devices
        if size > 1 and isinstance(devices, list) and (len(devices) < size or "cpu" in devices or "cuda" in devices):
            raise ValueError(
                f"each local server spans {size} GPUs (model.tensor_parallel_size × model.pipeline_parallel_size): "
                f"list at least {size} GPUs as cuda:N in fleet.local_devices (server i takes the i-th {size})"
            )
        return self

    def grpo_steps(self) -> int:
        """GRPO optimizer steps: `grpo.steps`, else the count that matches ES's generated completions."""
        if self.grpo.steps is not None:
            return self.grpo.steps
        completions = self.iterations * self.es.population * self.sampling.samples_per_prompt
        return max(1, round(completions / self.grpo.group_size))
