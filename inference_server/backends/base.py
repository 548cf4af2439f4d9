"""The backend protocol every inference backend implements, and the value types it exchanges.

The gRPC servicer talks only to this protocol, so `hf`, `vllm` and test doubles are interchangeable
and share one contract test (tests/inference_server/backends/test_contract.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from seedcast.inference_server.noise.kinds import ALL_TARGETS, LEGACY_NOISE_KIND
from seedcast.inference_server.noise.update_rules import PLAIN_RULE


@dataclass(frozen=True)
class Sampling:
    """How to generate: temperature 0 is greedy; `seed` makes sampling reproducible. `top_k` 0, `min_p` 0 and
    `repetition_penalty` 1 are off; a completion ends where it first contains a `stop` string, which is cut off.
    The filters apply in transformers' order: repetition penalty, temperature, top-k, top-p, min-p."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    samples_per_prompt: int = 1
    seed: int = 0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = ()

    def filters(self) -> dict[str, float | int]:
        """The sampling filters that are on, by name (for the parts of a backend that apply them itself)."""
        on = {"top_k": self.top_k > 0, "min_p": self.min_p > 0, "repetition_penalty": self.repetition_penalty != 1}
        return {name: getattr(self, name) for name, used in on.items() if used}


@dataclass(frozen=True)
class Completion:
    """One generated completion."""

    text: str
    tokens: int
    truncated: bool
    mean_entropy: float | None = None  # nats, full next-token distribution at T=1; only when asked for


class GenerationStopped(RuntimeError):
    """Generation was stopped early because its caller went away (a cancelled or timed-out RPC); nothing it
    generated is returned."""


def raise_if_stopped(stop: threading.Event | None) -> None:
    """Raise GenerationStopped when `stop` is set: backends call it between chunks and after a generate call."""
    if stop is not None and stop.is_set():
        raise GenerationStopped("the caller went away; generation stopped early")


@dataclass(frozen=True)
class BatchMember:
    """One member of a batched generation (`generate_members`): its seed, σ, sign and low rank (>= 1)."""

    seed: int
    sigma: float
    sign: int
    rank: int


@dataclass
class BackendInfo:
    """What a backend holds, reported by GetState."""

    model: str
    backend: str
    device: str
    dtype: str
    parameters: int
    noise: str = LEGACY_NOISE_KIND  # the noise kind perturbations and updates use (noise.NOISE_KINDS)
    batches_members: bool = False  # generates many low-rank members in one batch (MemberTasks.batched)
    lowrank_targets: str = ALL_TARGETS  # which tensors low-rank members perturb (noise.kinds.LOWRANK_TARGETS)


@runtime_checkable
class Backend(Protocol):
    """A model copy that can be perturbed from seeds, restored exactly, and updated in float32.

    Invariants every implementation keeps (pinned by the contract test):
    - outside a perturbation the inference weights, when read, equal cast(master), where master is float32;
    - `perturb` sets weights to cast(master + sign * sigma * noise(seed)); `restore` makes them
      bit-identical to before the perturbation (by copying from master, never by subtracting), at the
      latest when they are next read (`sync_weights`);
    - `apply_update` moves master in float32 by sum(coeff * noise(seed)), terms in the given order, through the
      step's update rule (noise/update_rules.py; `momentum` keeps a float32 velocity), by noise.apply.apply_rule;
      the inference weights follow at their next read, as after a restore.
    """

    supports_entropy: bool  # whether generate(with_entropy=True) works; Sample refuses it otherwise

    def perturb(self, seed: int, sigma: float, sign: int = 1, stochastic_rounding: bool = False, rank: int = 0) -> None:
        """Write the perturbed weights; only one perturbation may be active at a time. With
        `stochastic_rounding` the cast to a bfloat16 inference dtype rounds stochastically (noise/rounding.py);
        with `rank` > 0 each 2-D weight's noise is of that low rank (noise/lowrank.py), 0 is full rank."""

    def restore(self) -> None:
        """Return the inference weights to cast(master), bit-exactly (the write may be deferred until
        the weights are next read, see sync_weights)."""

    def sync_weights(self) -> None:
        """Write any deferred restore now; generate calls it first, and so must anything else that reads
        the inference weights directly."""

    def apply_update(
        self,
        terms: list[tuple[int, float]],
        rule: str = PLAIN_RULE,
        params: Mapping[str, float] | None = None,
        rank: int = 0,
    ) -> None:
        """Apply one step, master moved by sum(coeff * noise(seed)) in float32 through the update rule `rule`
        with `params`, the noise of perturbation rank `rank` (0: full); the inference weights are cast(master)
        when next read."""

    def generate(
        self,
        prompts: list[str],
        sampling: Sampling,
        system_prompt: str = "",
        with_entropy: bool = False,
        stop: threading.Event | None = None,
    ) -> list[list[Completion]]:
        """For each user prompt, `sampling.samples_per_prompt` completions (chat template applied);
        with `with_entropy`, each completion's mean token entropy too. Once `stop` is set, generation ends
        within about one decoding step and GenerationStopped is raised, so a cancelled call frees the worker."""

    def fingerprint(self) -> str:
        """Fingerprint of the float32 master weights (see noise.weights_fingerprint)."""

    def info(self) -> BackendInfo:
        """Model, backend, device, dtype and parameter count."""
