"""The core every weight-holding backend shares: the perturb/restore/update state machine, written once.

A backend holds a float32 master and inference weights equal to cast(master) between calls. Its calls
move through three states:

    clean ──perturb──▶ perturbed ──restore──▶ restore pending ──sync_weights──▶ clean
                                                 │
                                                 └──perturb (any member)──▶ perturbed

`restore` only marks the inference weights stale: the write of cast(master) happens when something next
reads them (`sync_weights`, which generation calls first), and is skipped when the next perturbation
overwrites every weight anyway, so a member that follows a member pays no restore. When the next
perturbation is the one the weights still hold (the same member's next prompt shard), nothing is written.
`apply_update` is refused during a perturbation; it moves the master only and leaves the write of the new
cast(master) pending in the same way, so a `Sync` of many steps writes the weights once, and an ES step
followed by the next iteration's first member writes them not at all.

A backend fills in four hooks: `_write_perturbation` (write cast(master + sign·σ·ε)), `_write_master`
(write cast(master)), `_update_master` (apply one step's update rule to the float32 master only) and
`_parameter_count`; plus `fingerprint` and `generate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from seedcast.inference_server.backends.base import BackendInfo
from seedcast.inference_server.model_source import FormattedPrompt, chat_text
from seedcast.inference_server.noise.update_rules import PLAIN_RULE


class PerturbationStateError(RuntimeError):
    """perturb/restore/apply_update called out of order."""


@dataclass(frozen=True)
class Perturbation:
    """What the inference weights hold: cast(master + sign·σ·ε(seed)), the cast stochastic when asked for, ε
    of perturbation rank `rank` (0: full rank)."""

    seed: int
    sigma: float
    sign: int
    stochastic_rounding: bool
    rank: int = 0

    def partner(self) -> Perturbation:
        """The mirrored member's perturbation: the same noise with the other sign."""
        return Perturbation(self.seed, self.sigma, -self.sign, self.stochastic_rounding, self.rank)


class PerturbableBackend:
    """The shared state machine (see the module docstring); subclasses set `name`, `supports_entropy`,
    `model_spec`, `device`, `dtype`, `tokenizer`, `noise_kind` and `lowrank_targets`, and implement the hooks."""

    name: str
    supports_entropy: bool
    model_spec: str
    device: torch.device
    dtype: torch.dtype
    tokenizer: Any
    noise_kind: str
    lowrank_targets: str  # which tensors low-rank members perturb (noise.kinds.LOWRANK_TARGETS), fixed at start

    def __init__(self) -> None:
        self.perturbed = False
        self._restore_pending = False  # the inference weights still hold a perturbation restore() undid
        self._written: Perturbation | None = None  # what they hold while the restore is deferred
        # Why low-rank members cannot share a batch here (None: they can); a backend that batches sets it at start.
        self._batching_problem: str | None = "this backend evaluates members one at a time"

    # ----- hooks -------------------------------------------------------------------------------
    def _write_perturbation(self, perturbation: Perturbation) -> None:
        """Write cast(master + sign·σ·ε(seed)) into every inference weight."""
        raise NotImplementedError

    def _write_master(self) -> None:
        """Write cast(master) into every inference weight."""
        raise NotImplementedError

    def _update_master(self, terms: list[tuple[int, float]], rule: str, params: Mapping[str, float], rank: int) -> None:
        """Apply one step's update rule to the float32 master (noise.apply.apply_rule) with noise of perturbation
        rank `rank`; the inference weights are left as they are (the state machine writes cast(master) when they
        are next read)."""
        raise NotImplementedError

    def _parameter_count(self) -> int:
        raise NotImplementedError

    def batching_problem(self) -> str | None:
        """Why this backend cannot generate many low-rank members in one batch (None: it can, with
        `generate_members`)."""
        return self._batching_problem

    def _begin_member_batch(self) -> None:
        """What `generate_members` needs first: a backend that batches, no active perturbation, and the shared
        weights at cast(master) (each member's perturbation is then a correction to them)."""
        if self._batching_problem is not None:
            raise PerturbationStateError(f"cannot batch members: {self._batching_problem}")
        if self.perturbed:
            raise PerturbationStateError("generate_members() called during a perturbation; call restore() first")
        self.sync_weights()

    # ----- the state machine -------------------------------------------------------------------
    def perturb(self, seed: int, sigma: float, sign: int = 1, stochastic_rounding: bool = False, rank: int = 0) -> None:
        """Write cast(master + sign·σ·ε(seed)) into the inference weights (the cast stochastic when asked for; ε
        of low rank `rank` when it is above 0)."""
        if self.perturbed:
            raise PerturbationStateError("perturb() called while a perturbation is active; call restore() first")
        if rank < 0:
            raise ValueError(f"a perturbation rank is 0 (full) or positive, not {rank}")
        perturbation = Perturbation(int(seed), float(sigma), int(sign), bool(stochastic_rounding), int(rank))
        self.perturbed = True
        if self._restore_pending and self._written == perturbation:  # still written: the restore was deferred
            self._restore_pending = False
            return
        self._restore_pending = False  # every inference weight is overwritten now
        self._written = None  # until the write has finished: a write that fails midway holds no perturbation
        self._write_perturbation(perturbation)
        self._written = perturbation

    def restore(self) -> None:
        """Return to cast(master), bit-exactly; the copy is written by the next sync_weights (or skipped when a
        perturbation comes first)."""
        self._restore_pending = self.perturbed or self._restore_pending
        self.perturbed = False

    def sync_weights(self) -> None:
        """Write a pending restore now: afterwards the inference weights are cast(master) or the active
        perturbation. Everything that reads the inference weights calls this first."""
        if self._restore_pending:
            self._write_master()
            self._weights_are_master()

    def apply_update(
        self,
        terms: list[tuple[int, float]],
        rule: str = PLAIN_RULE,
        params: Mapping[str, float] | None = None,
        rank: int = 0,
    ) -> None:
        """Move master by Σ coeff·ε(seed) in float32 through the update rule `rule` with `params`, ε of
        perturbation rank `rank`; the inference weights become cast(master) at the next read (or the next
        perturbation overwrites them)."""
        if self.perturbed:
            raise PerturbationStateError("apply_update() called during a perturbation; call restore() first")
        if rank < 0:
            raise ValueError(f"a perturbation rank is 0 (full) or positive, not {rank}")
        terms = [(int(seed), float(coeff)) for seed, coeff in terms]
        self._written = None  # whatever the inference weights hold, it is no perturbation of the new master
        self._restore_pending = True
        self._update_master(terms, rule, {str(k): float(v) for k, v in (params or {}).items()}, int(rank))

    def _weights_are_master(self) -> None:
        self._restore_pending = False
        self._written = None

    # ----- shared answers ----------------------------------------------------------------------
    def info(self) -> BackendInfo:
        """What this backend holds."""
        return BackendInfo(
            model=self.model_spec,
            backend=self.name,
            device=str(self.device),
            dtype=str(self.dtype).removeprefix("torch."),
            parameters=self._parameter_count(),
            noise=self.noise_kind,
            batches_members=self.batching_problem() is None,
            lowrank_targets=self.lowrank_targets,
        )

    def chat_texts(self, prompts: list[str], system_prompt: str = "") -> list[str]:
        """Each user prompt in the model's chat template (plain text when it has none), the same on every
        backend; a FormattedPrompt (a conversation, or a batch that set its own formatting) is already final."""
        return [
            prompt if isinstance(prompt, FormattedPrompt) else chat_text(self.tokenizer, prompt, system_prompt)
            for prompt in prompts
        ]
