"""The `hf` backend: a Hugging Face transformers model on CPU or CUDA, perturbed in place.

Memory layout: the float32 master copy (the truth, updated by ES steps) plus the inference weights
in the chosen dtype (bf16 by default where native), which always equal cast(master) between calls.
A perturbation writes cast(master + sign·σ·ε) into the inference weights; restore copies master
back, which is exact because the cast is deterministic. Noise is never subtracted from weights.
The copy is deferred until something reads the inference weights (`sync_weights`, which generate
calls first) and skipped when the next perturbation overwrites them all anyway: a member that
follows a member pays no restore.
With `pair_cache`, one more inference-dtype copy holds cast(master − sign·σ·ε), computed from the
same noise draw, for the mirrored partner that usually follows on the same server.

    backend = HFBackend("smollm2-135m-instruct")          # the bundled model, CPU
    backend.perturb(seed=7, sigma=1e-2); backend.generate(["2+2?"], Sampling()); backend.restore()
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

import torch

from seedcast.inference_server.backends.base import BackendInfo, Completion, Sampling
from seedcast.inference_server.backends.devices import pair_cache_by_default, resolve_device, resolve_dtype
from seedcast.inference_server.backends.entropy import GenerationEntropy
from seedcast.inference_server.model_source import chat_text, load_model_and_tokenizer
from seedcast.inference_server.noise.apply import (
    apply_rule,
    for_each_tensor,
    weights_fingerprint,
    write_perturbed,
)
from seedcast.inference_server.noise.kinds import noise_source, resolve_kind
from seedcast.inference_server.noise.update_rules import PLAIN_RULE

log = logging.getLogger("seedcast.server")


class PerturbationStateError(RuntimeError):
    """perturb/restore called out of order."""


class HFBackend:
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
    ) -> None:
        resolve_kind(noise, "cpu")  # first: an unknown kind fails before the model loads
        if threads:
            torch.set_num_threads(threads)
        self.model_spec = model
        self.device = resolve_device(device)
        self.noise = noise_source(resolve_kind(noise, self.device.type))
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
        self.model = cpu_model.to(self.device, self.dtype)
        self.noise.prepare(self.device)
        self.params = dict(self.model.named_parameters())
        self.perturbed = False
        self._restore_pending = False  # the inference weights still hold a perturbation restore() undid
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
        self._mirror_key: tuple[int, float, int, bool] | None = None  # (seed, σ, sign, rounding) the cache holds
        self.pair_cache_hits = 0
        # The perturbation the inference weights hold while a restore is deferred: asking for it again (the same
        # member on its next prompt shard) costs nothing.
        self._written_key: tuple[int, float, int, bool] | None = None
        self.repeat_hits = 0
        self.velocity: dict[str, torch.Tensor] = {}  # the momentum buffers, empty until a step uses momentum
        self._sync_inference_weights()

    # ----- weights -------------------------------------------------------------------------
    def _sync_inference_weights(self) -> None:
        with torch.no_grad():
            for name, param in self.params.items():
                param.copy_(self.master[name])
        self._restore_pending = False
        self._written_key = None

    def sync_weights(self) -> None:
        """Write a pending restore now: afterwards the inference weights are cast(master) or the active
        perturbation. Everything that reads the inference weights calls this first."""
        if self._restore_pending:
            self._sync_inference_weights()

    def perturb(self, seed: int, sigma: float, sign: int = 1, stochastic_rounding: bool = False) -> None:
        """Write cast(master + sign·σ·ε(seed)) into the inference weights (the cast stochastic when asked for)."""
        if self.perturbed:
            raise PerturbationStateError("perturb() called while a perturbation is active; call restore() first")
        key = (int(seed), float(sigma), int(sign), bool(stochastic_rounding))
        self.perturbed = True
        if self._restore_pending and self._written_key == key:  # the same member again (its next prompt shard):
            self._restore_pending = False  # its weights are still written, the restore was deferred
            self.repeat_hits += 1
            return
        self._restore_pending = False  # every inference weight is overwritten below
        self._written_key = key
        if self._mirror_key == key:  # the partner of the previous member: computed with its noise
            with torch.no_grad():
                for name, param in self.params.items():
                    param.copy_(self._mirror[name])
            self._mirror_key = None
            self.pair_cache_hits += 1
            return
        scale = float(sign) * float(sigma)
        mirror = self._mirror
        round_for = self.dtype if stochastic_rounding else None

        def perturb_one(name: str) -> None:
            # master − sign·σ·ε == master + (−sign)·σ·ε bit for bit (negation is exact), so the mirror
            # holds what perturbing the partner would write.
            targets = [(self.params[name], 1), *([(mirror[name], -1)] if mirror else [])]
            with torch.no_grad():
                write_perturbed(self.master[name], self.noise, seed, name, scale, targets, round_for)

        self._mirror_key = None
        for_each_tensor(self.master.keys(), perturb_one, self.threads)
        if mirror:
            self._mirror_key = (key[0], key[1], -key[2], key[3])

    def restore(self) -> None:
        """Return to cast(master), bit-exactly; the copy is written by the next sync_weights (or skipped when
        a perturbation comes first)."""
        self._restore_pending = self.perturbed or self._restore_pending
        self.perturbed = False

    def apply_update(
        self, terms: list[tuple[int, float]], rule: str = PLAIN_RULE, params: Mapping[str, float] | None = None
    ) -> None:
        """Move master by Σ coeff·ε(seed) in float32 through the update rule (the momentum rule's velocity is
        allocated on first use: one more float32 copy of the weights), then re-cast the inference weights."""
        if self.perturbed:
            raise PerturbationStateError("apply_update() called during a perturbation; call restore() first")
        self._mirror_key = None  # cached partners were computed from the old master
        apply_rule(self.master, terms, rule, params or {}, self.velocity, self.noise, self.threads)
        self._sync_inference_weights()

    def fingerprint(self) -> str:
        """Fingerprint of the float32 master weights."""
        return weights_fingerprint(self.master)

    def info(self) -> BackendInfo:
        """What this backend holds."""
        return BackendInfo(
            model=self.model_spec,
            backend=self.name,
            device=str(self.device),
            dtype=str(self.dtype).removeprefix("torch."),
            parameters=sum(t.numel() for t in self.master.values()),
            noise=self.noise.kind,
        )

    # ----- generation ----------------------------------------------------------------------
    def chat_texts(self, prompts: list[str], system_prompt: str = "") -> list[str]:
        """Wrap each user prompt in the model's chat template (plain text when it has none)."""
        return [chat_text(self.tokenizer, prompt, system_prompt) for prompt in prompts]

    def generate(
        self, prompts: list[str], sampling: Sampling, system_prompt: str = "", with_entropy: bool = False
    ) -> list[list[Completion]]:
        """`samples_per_prompt` completions per prompt, in as few `generate` calls as max_batch allows."""
        self.sync_weights()
        texts = [text for text in self.chat_texts(prompts, system_prompt) for _ in range(sampling.samples_per_prompt)]
        torch.manual_seed(sampling.seed)
        completions: list[Completion] = []
        for start in range(0, len(texts), self.max_batch):
            completions.extend(self._generate_chunk(texts[start : start + self.max_batch], sampling, with_entropy))
        n = sampling.samples_per_prompt
        return [completions[i * n : (i + 1) * n] for i in range(len(prompts))]

    def _generate_chunk(self, texts: list[str], sampling: Sampling, with_entropy: bool = False) -> list[Completion]:
        encoded = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        greedy = sampling.temperature <= 0
        entropy = GenerationEntropy(self.model)
        with torch.inference_mode(), entropy if with_entropy else contextlib.nullcontext():
            output = self.model.generate(
                **encoded,
                do_sample=not greedy,
                temperature=None if greedy else sampling.temperature,
                top_p=None if greedy else sampling.top_p,
                top_k=None,
                max_new_tokens=sampling.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.tokenizer.eos_token_id,
            )
        prompt_length = encoded["input_ids"].shape[1]
        eos = self.tokenizer.eos_token_id
        rows = output[:, prompt_length:].tolist()
        lengths = [row.index(eos) + 1 if eos in row else len(row) for row in rows]
        entropies = entropy.means(lengths) if with_entropy else [None] * len(lengths)
        results = []
        for row, length, mean_entropy in zip(rows, lengths, entropies, strict=True):
            text = self.tokenizer.decode(row[:length], skip_special_tokens=True)
            results.append(Completion(text=text, tokens=length, truncated=eos not in row, mean_entropy=mean_entropy))
        return results
