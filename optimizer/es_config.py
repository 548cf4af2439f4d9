"""The `es` section of the training config: the strategy, its noise and its members' shape."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from seedcast.inference_server.noise.kinds import ALL_TARGETS, FULL_RANK, LOWRANK_TARGETS, PERTURBATIONS, ROUNDINGS
from seedcast.inference_server.serve_config import LOWRANK_TARGETS_HELP, NOISE_HELP, NoiseChoice
from seedcast.optimizer.config_section import Section
from seedcast.optimizer.es.fitness import FITNESS_MODES
from seedcast.optimizer.es.shaping import SHAPINGS
from seedcast.optimizer.es.strategies import STRATEGIES
from seedcast.proto.choices import describe_choices, one_of

DEFAULT_RANK = 1  # es.rank: EGGROLL's rank, and the cheapest low-rank member


class ESConfig(Section):
    """The evolution strategy."""

    strategy: Annotated[str, one_of(STRATEGIES, "ES strategy")] = Field(
        "openes", description="The strategy (optimizer/es/strategies.py); it is built from the settings below."
    )
    mirrored: bool = Field(True, description="Evaluate ±ε pairs (antithetic sampling); needs an even population.")
    population: int = Field(16, ge=2, description="Members per iteration (N).")
    sigma: float = Field(5e-3, gt=0.0, le=1.0, allow_inf_nan=False, description="Noise scale σ.")
    learning_rate: float = Field(1e-5, gt=0.0, allow_inf_nan=False, description="Step size α in c_i = α·F_i/(N·σ).")
    shaping: Annotated[str, one_of(SHAPINGS, "fitness shaping")] = Field(
        "zscore", description="Fitness shaping (optimizer/es/shaping.py)."
    )
    noise: NoiseChoice = Field(
        "auto",
        description=f"{NOISE_HELP}; auto: the servers' kind if any are given, else table for CPU and gaussian for "
        "GPU local servers, written into the run's config.yaml at start.",
    )
    fitness: Annotated[str, one_of(FITNESS_MODES, "fitness mode")] = Field(
        "mean",
        description="mean: a member's fitness is its mean reward over the batch; per_prompt: each prompt's reward "
        "is first centred and scaled across the population (prompts every member scores alike count for nothing, "
        "as in GRPO's group advantages), then averaged. Results then carry one byte per prompt. pass_at_k: the "
        "mean over prompts of the unbiased pass@k (k = es.fitness_k) of the member's samples "
        "(sampling.samples_per_prompt >= k, sampled at T > 0): coverage rather than accuracy.",
    )
    fitness_k: int = Field(
        1, ge=1, le=256, description="k of es.fitness=pass_at_k; at most sampling.samples_per_prompt."
    )
    momentum: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        allow_inf_nan=False,
        description="Momentum β in seed space: servers keep a float32 velocity v = β·v + step and add v to the "
        "master (one more float32 copy of the weights on each server). 0 = plain steps. Fixed for a run.",
    )
    rounding: Annotated[str, one_of(ROUNDINGS, "rounding")] = Field(
        "nearest", description=f"How perturbed weights are cast to the inference dtype: {describe_choices(ROUNDINGS)}."
    )
    perturbation: Annotated[str, one_of(PERTURBATIONS, "perturbation")] = Field(
        "full", description=f"The shape of a member's noise: {describe_choices(PERTURBATIONS)}. Fixed for a run."
    )
    lowrank_targets: Annotated[str, one_of(LOWRANK_TARGETS, "low-rank targets")] = Field(
        ALL_TARGETS,
        description=f"{LOWRANK_TARGETS_HELP}. Servers must be started with the same --lowrank-targets (local ones "
        "are). Fixed for a run.",
    )
    rank: int = Field(
        DEFAULT_RANK,
        ge=1,
        le=256,
        description="The rank r of es.perturbation=lowrank (each 2-D weight's noise is A·Bᵀ/√r, A and B with r "
        "columns). Fixed for a run.",
    )

    @field_validator("population")
    @classmethod
    def _even_when_mirrored(cls, population: int, info: ValidationInfo) -> int:
        # A field validator (not a model validator) so this is reported even when other fields fail.
        if info.data.get("mirrored", True) and population % 2:
            raise ValueError(
                f"mirrored sampling needs an even population, got {population}; "
                "set es.population to an even number or es.mirrored=false"
            )
        return population

    @field_validator("rank")
    @classmethod
    def _rank_needs_lowrank(cls, rank: int, info: ValidationInfo) -> int:
        # Runs only when es.rank is given (a config snapshot gives the default): another rank on full-rank
        # members would be silently ignored.
        if rank != DEFAULT_RANK and info.data.get("perturbation", "full") != "lowrank":
            raise ValueError("es.rank applies to low-rank members only; set es.perturbation=lowrank too")
        return rank

    @field_validator("lowrank_targets")
    @classmethod
    def _targets_need_lowrank(cls, targets: str, info: ValidationInfo) -> str:
        if targets != ALL_TARGETS and info.data.get("perturbation", "full") != "lowrank":
            raise ValueError("es.lowrank_targets applies to low-rank members only; set es.perturbation=lowrank too")
        return targets

    @property
    def perturbation_rank(self) -> int:
        """The rank members and steps carry: es.rank for low-rank members, FULL_RANK (0) otherwise."""
        return self.rank if self.perturbation == "lowrank" else FULL_RANK

    def strategy_options(self) -> dict[str, Any]:
        """The strategy's constructor arguments from this section (the run seed is the caller's)."""
        return {
            "population": self.population,
            "sigma": self.sigma,
            "learning_rate": self.learning_rate,
            "mirrored": self.mirrored,
            "shaping": self.shaping,
            "momentum": self.momentum,
            "rank": self.perturbation_rank,
        }
