"""OpenAI-ES (Salimans et al., 2017, arXiv:1703.03864) over seeds, as a pure ask/tell object.

The state is an explicit frozen value the caller passes back, so checkpointing it is writing one
object; with plain SGD steps it is just the iteration counter, because the weights themselves
live on the servers and the update log.

Sign convention (the one place it is stated): **reward is maximised**. A member with shaped
fitness F_i evaluated at master + sign_i·σ·ε_i contributes coefficient +sign_i·α·F_i/(N·σ) to
ε_i, so the step moves toward members that scored above the population.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seedcast.inference_server.noise.update_rules import PLAIN_RULE
from seedcast.optimizer.es.seeds import derive_seed
from seedcast.optimizer.es.shaping import SHAPINGS
from seedcast.optimizer.es.step import ESStep


@dataclass(frozen=True)
class ESState:
    """Where the strategy is: the next iteration to ask for (= the number of updates applied)."""

    iteration: int = 0


@dataclass(frozen=True)
class Member:
    """A population member: evaluate at master + sign·σ·noise(seed), sampling with `sampling_seed`.

    σ travels with the member, so the servers perturb with the σ the strategy will form its update
    with, even for a strategy that adapts σ between iterations."""

    index: int
    seed: int
    sign: int
    sampling_seed: int
    sigma: float
    rank: int = 0  # the perturbation's rank: 0 full, r >= 1 low rank (inference_server/noise/lowrank.py)


class OpenES:
    """Seeded OpenAI-ES with optional mirrored sampling, pluggable fitness shaping and momentum in seed space.

    With `momentum` β > 0 its steps use the servers' `momentum` update rule (a float32 velocity, v = β·v + Σ,
    master += v); with 0 they are plain steps. With `rank` r ≥ 1 its members are low-rank perturbations
    (EGGROLL) and its steps move the weights by the same low-rank noise; 0 is full rank."""

    def __init__(
        self,
        *,
        population: int,
        sigma: float,
        learning_rate: float,
        run_seed: int = 0,
        mirrored: bool = True,
        shaping: str = "zscore",
        momentum: float = 0.0,
        rank: int = 0,
    ) -> None:
        if population < 2 or (mirrored and population % 2):
            raise ValueError("population must be >= 2, and even with mirrored sampling")
        if not (math.isfinite(sigma) and sigma > 0 and math.isfinite(learning_rate) and learning_rate > 0):
            raise ValueError("sigma and learning_rate must be finite and > 0")
        if shaping not in SHAPINGS:
            raise ValueError(f"unknown shaping {shaping!r}; choose one of {', '.join(SHAPINGS)}")
        if not (math.isfinite(momentum) and 0.0 <= momentum < 1.0):
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.population = population
        self.sigma = sigma
        self.learning_rate = learning_rate
        self.run_seed = run_seed
        self.mirrored = mirrored
        self.shaping = shaping
        if rank < 0:
            raise ValueError(f"rank must be 0 (full) or >= 1 (low rank), got {rank}")
        self.momentum = momentum
        self.rank = rank

    def ask(self, state: ESState) -> list[Member]:
        """The members of iteration `state.iteration`; mirrored pairs share seed and sampling seed."""
        members = []
        for index in range(self.population):
            pair = index // 2 if self.mirrored else index
            sign = (1 if index % 2 == 0 else -1) if self.mirrored else 1
            members.append(
                Member(
                    index=index,
                    seed=derive_seed(self.run_seed, "member", state.iteration, pair),
                    sign=sign,
                    # Common random numbers: both halves of a pair sample with the same stream.
                    sampling_seed=derive_seed(self.run_seed, "sampling", state.iteration, pair),
                    sigma=self.sigma,
                    rank=self.rank,
                )
            )
        return members

    def tell(self, state: ESState, members: list[Member], fitness: dict[int, float]) -> tuple[ESStep, ESState]:
        """Form the step from the members that returned a finite fitness; failed ones are left out.

        Terms of one seed (a mirrored pair) are merged into one coefficient, in member order.
        """
        used = [m for m in members if m.index in fitness and math.isfinite(fitness[m.index])]
        terms: dict[int, float] = {}
        if len(used) >= 2:
            shaped = SHAPINGS[self.shaping](np.array([fitness[m.index] for m in used], dtype=np.float64))
            scale = self.learning_rate / (len(used) * self.sigma)
            for member, weight in zip(used, shaped, strict=True):
                terms[member.seed] = terms.get(member.seed, 0.0) + member.sign * scale * float(weight)
        step = ESStep(
            step=state.iteration + 1,
            sigma=self.sigma,
            terms=[(s, c) for s, c in terms.items() if c != 0.0],
            rule="momentum" if self.momentum else PLAIN_RULE,
            params={"momentum": self.momentum} if self.momentum else {},
            rank=self.rank,
        )
        return step, ESState(iteration=state.iteration + 1)
