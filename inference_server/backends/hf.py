"""The `hf` backend: a Hugging Face transformers model on CPU or CUDA, perturbed in place.

Memory layout: the float32 master copy (the truth, updated by ES steps) plus the inference weights
in the chosen dtype (bf16 by default where native), which always equal cast(master) between calls.
A perturbation writes cast(master + sign·σ·ε) into the inference weights; restore copies master
back, which is exact because the cast is deterministic. Noise is never subtracted from weights.
The perturb/restore/update state machine, with its deferred restore, is perturbable.py's.
With `pair_cache`, one more inference-dtype copy holds cast(master − sign·σ·ε), computed from the
same noise draw, for the mirrored partner that usually follows on the same server.

    backend = HFBackend("smollm2-135m-instruct")          # the bundled model, CPU
    backend.perturb(seed=7, sigma=1e-2); backend.generate(["2+2?"], Sampling()); backend.restore()
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping

import torch
from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from seedcast.inference_server.backends.base import BatchMember, Completion, Sampling, raise_if_stopped
from seedcast.inference_server.backends.batched_members import LowRankBatch, batchable_problem
from seedcast.inference_server.backends.devices import pair_cache_by_default, resolve_device, resolve_dtype
from seedcast.inference_server.backends.entropy import GenerationEntropy
from seedcast.inference_server.backends.member_sampling import PerMemberSampler
from seedcast.inference_server.backends.perturbable import PerturbableBackend, Perturbation
from seedcast.inference_server.backends.stop_strings import cut_at_stop, tokens_until_stop
from seedcast.inference_server.model_source import load_model_and_tokenizer
from seedcast.inference_server.noise.apply import (
    apply_rule,
    for_each_tensor,
    weights_fingerprint,
    write_perturbed,
)
from seedcast.inference_server.noise.kinds import ALL_TARGETS, noise_source, resolve_kind
from seedcast.inference_server.noise.lowrank import frozen_tensors, noise_of_rank

log = logging.getLogger("seedcast.server")


class StopWhenSet(StoppingCriteria):
    """Ends every sequence of a `generate` call at the next decoding step once `stop` is set."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        return torch.full((input_ids.shape[0],), self.stop.is_set(), dtype=torch.bool, device=input_ids.device)


class HFBackend(PerturbableBackend):
    """A transformers causal LM with a float32 master copy; see the module docstring."""

    name = "hf"
    supports_entropy = True

    def __init__(
        self,
        model: str,
        device: str = "auto",
        dtype: str = "auto",
        threads: int | None = None,
        max_batch: int = 256,
        pair_cache: bool | str = "auto",
        noise: str = "auto",
        lowrank_targets: str = ALL_TARGETS,
    ) -> None:
        super().__init__()
        resolve_kind(noise, "cpu")  # first: an unknown kind fails before the model loads
        if threads:
            torch.set_num_threads(threads)
        self.model_spec = model
        self.device = resolve_device(device)
        self.noise = noise_source(resolve_kind(noise, self.device.type))
        self.noise_kind = self.noise.kind
        self.dtype = resolve_dtype(dtype, self.device)
        self.max_batch = max_batch
        self.threads = threads
        cpu_model, self.tokenizer = load_model_and_tokenizer(model)
        # named_parameters() yields a tied weight once, under its canonical (first) HF name. When the model
        # is cast to another dtype below, the loaded float32 tensors become the master without a copy (the
        # cast gives the model new tensors): that keeps the peak at master + inference weights, not twice the
        # float32 model. In float32 inference on the same device, the master must be a separate copy.
        share = self.dtype != torch.float32
        self.master = {
            name: param.detach().to(self.device, torch.float32, copy=not share)
            for name, param in cpu_model.named_parameters()
        }
        vocabulary = cpu_model.get_input_embeddings().weight.shape[0]
        self.lowrank_targets = lowrank_targets
        self.lowrank_frozen = frozen_tensors(lowrank_targets, self.master, vocabulary)
        self.model = cpu_model.to(self.device, self.dtype)
        self.noise.prepare(self.device)
        self.params = dict(self.model.named_parameters())
        # Mirrored pairs: perturbing with +σε also writes cast(master − σε) here, so the partner member
        # costs a copy instead of a second noise draw (one more inference-dtype copy of the weights).
        if pair_cache == "auto":
            copy_bytes = sum(param.numel() * param.element_size() for param in self.params.values())
            pair_cache = pair_cache_by_default(self.device, copy_bytes)
            log.info("pair cache %s (auto: %s)", "on" if pair_cache else "off", self.device.type)
        self.pair_cache = bool(pair_cache)
        self._mirror: dict[str, torch.Tensor] = (
            {name: torch.empty_like(param) for name, param in self.params.items()} if self.pair_cache else {}
        )
        self._mirror_holds: Perturbation | None = None  # the partner perturbation the mirror copy holds
        self.velocity: dict[str, torch.Tensor] = {}  # the update rule's state (momentum buffers), empty until used
        self._batching_problem = batchable_problem(self.model, self.params)
        self._write_master()

    # ----- the hooks of the shared state machine (perturbable.py) ---------------------------
    def _write_master(self) -> None:
        with torch.no_grad():
            for name, param in self.params.items():
                param.copy_(self.master[name])

    def _write_perturbation(self, perturbation: Perturbation) -> None:
        if self._mirror_holds == perturbation:  # the partner of the previous member: computed with its noise
            self._write_partner()
            return
        scale = float(perturbation.sign) * perturbation.sigma
        mirror = self._mirror
        round_for = self.dtype if perturbation.stochastic_rounding else None
        source = noise_of_rank(self.noise, perturbation.rank, self.master, self.lowrank_frozen)

        def perturb_one(name: str) -> None:
            # master − sign·σ·ε == master + (−sign)·σ·ε bit for bit (negation is exact), so the mirror
            # holds what perturbing the partner would write.
            targets = [(self.params[name], 1), *([(mirror[name], -1)] if mirror else [])]
            with torch.no_grad():
                write_perturbed(self.master[name], source, perturbation.seed, name, scale, targets, round_for)

        self._mirror_holds = None
        for_each_tensor(self.master.keys(), perturb_one, self.threads)
        if mirror:
            self._mirror_holds = perturbation.partner()

    def _write_partner(self) -> None:
        """Copy the mirror (the partner's weights, computed with the previous member's noise draw)."""
        with torch.no_grad():
            for name, param in self.params.items():
                param.copy_(self._mirror[name])
        self._mirror_holds = None

    def _update_master(self, terms: list[tuple[int, float]], rule: str, params: Mapping[str, float], rank: int) -> None:
        self._mirror_holds = None  # cached partners were computed from the old master
        apply_rule(self.master, terms, rule, params, self.velocity, self.noise, self.threads, rank, self.lowrank_frozen)

    def _parameter_count(self) -> int:
        return sum(t.numel() for t in self.master.values())

    def fingerprint(self) -> str:
        """Fingerprint of the float32 master weights."""
        return weights_fingerprint(self.master)

    # ----- generation ----------------------------------------------------------------------
    def generate(
        self,
        prompts: list[str],
        sampling: Sampling,
        system_prompt: str = "",
        with_entropy: bool = False,
        stop: threading.Event | None = None,
    ) -> list[list[Completion]]:
        """`samples_per_prompt` completions per prompt, in as few `generate` calls as max_batch allows; ends
        early with GenerationStopped once `stop` is set."""
        self.sync_weights()
        texts = [text for text in self.chat_texts(prompts, system_prompt) for _ in range(sampling.samples_per_prompt)]
        torch.manual_seed(sampling.seed)
        completions: list[Completion] = []
        for start in range(0, len(texts), self.max_batch):
            chunk = texts[start : start + self.max_batch]
            completions.extend(self._generate_chunk(chunk, sampling, with_entropy, stop=stop))
        n = sampling.samples_per_prompt
        return [completions[i * n : (i + 1) * n] for i in range(len(prompts))]

    def generate_members(
        self,
        members: list[BatchMember],
        sampling_seeds: list[int],
        prompts: list[str],
        sampling: Sampling,
        system_prompt: str = "",
        stop: threading.Event | None = None,
    ) -> list[list[list[Completion]]]:
        """Per member, per prompt, `samples_per_prompt` completions, the low-rank members generated together
        (batched_members.py): sequences member-major, as many whole members per `generate` call as max_batch
        holds. Member i samples with its own generator, seeded `sampling_seeds[i]` (member_sampling.py). Ends early
        with GenerationStopped once `stop` is set."""
        self._begin_member_batch()
        n = sampling.samples_per_prompt
        texts = [text for text in self.chat_texts(prompts, system_prompt) for _ in range(n)]
        per_call = max(1, self.max_batch // len(texts))
        answers: list[list[list[Completion]]] = []
        for first in range(0, len(members), per_call):
            group = members[first : first + per_call]
            sampler = None
            if sampling.temperature > 0:
                seeds = sampling_seeds[first : first + per_call]
                sampler = PerMemberSampler(seeds, len(texts), sampling, self.device)
            batch = LowRankBatch(self.model, self.params, self.noise, group, len(texts), self.lowrank_frozen)
            with batch:
                completions = self._generate_chunk(texts * len(group), sampling, sampler=sampler, stop=stop)
            for index in range(len(group)):
                own = completions[index * len(texts) : (index + 1) * len(texts)]
                answers.append([own[i * n : (i + 1) * n] for i in range(len(prompts))])
        return answers

    def _generate_chunk(
        self,
        texts: list[str],
        sampling: Sampling,
        with_entropy: bool = False,
        sampler: PerMemberSampler | None = None,
        stop: threading.Event | None = None,
    ) -> list[Completion]:
        raise_if_stopped(stop)
        encoded = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        greedy = sampling.temperature <= 0 or sampler is not None  # a sampler leaves one token for greedy to pick
        entropy = GenerationEntropy(self.model)
        with torch.inference_mode(), entropy if with_entropy else contextlib.nullcontext():
            output = self.model.generate(
                **encoded,
                do_sample=not greedy,
                temperature=None if greedy else sampling.temperature,
                top_p=None if greedy else sampling.top_p,
                top_k=None if greedy or not sampling.top_k else sampling.top_k,
                min_p=None if greedy or not sampling.min_p else sampling.min_p,
                repetition_penalty=sampling.filters().get("repetition_penalty"),
                stop_strings=list(sampling.stop) or None,
                tokenizer=self.tokenizer if sampling.stop else None,
                max_new_tokens=sampling.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
                logits_processor=LogitsProcessorList([sampler]) if sampler is not None else None,
                stopping_criteria=StoppingCriteriaList([StopWhenSet(stop)]) if stop is not None else None,
            )
        raise_if_stopped(stop)  # what was generated before the stop is dropped, never scored
        prompt_length = encoded["input_ids"].shape[1]
        eos = self.tokenizer.eos_token_id
        rows = output[:, prompt_length:].tolist()
        lengths = [row.index(eos) + 1 if eos in row else len(row) for row in rows]
        entropies = entropy.means(lengths) if with_entropy else [None] * len(lengths)
        results = []
        for row, length, mean_entropy in zip(rows, lengths, entropies, strict=True):
            results.append(self._completion(row[:length], sampling.stop, ended=eos in row, mean_entropy=mean_entropy))
        return results

    def _completion(
        self, tokens: list[int], stops: tuple[str, ...], ended: bool, mean_entropy: float | None
    ) -> Completion:
        """A generated row as a Completion; with stop strings, cut where the first one appears (stop_strings.py)."""
        text, stopped = cut_at_stop(self.decode(tokens), stops)
        if stopped:
            return Completion(text, tokens_until_stop(tokens, self.decode, stops), False, mean_entropy)
        return Completion(text=text, tokens=len(tokens), truncated=not ended, mean_entropy=mean_entropy)

    def decode(self, tokens: list[int]) -> str:
        """Token ids as the text an evaluator scores (special tokens left out)."""
        return self.tokenizer.decode(tokens, skip_special_tokens=True)
