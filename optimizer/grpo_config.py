"""The `grpo` section of a run's config: the GRPO baseline (`seedcast grpo`, on TRL's GRPOTrainer)."""

from __future__ import annotations

from pydantic import Field

from seedcast.optimizer.config_section import Section


class GRPOConfig(Section):
    """The GRPO baseline (`seedcast grpo`, on TRL's GRPOTrainer). It shares the task, the minibatch size
    (`batch_size` problems per step) and `sampling.max_new_tokens` with ES, so both methods see the same
    problems, prompts and rewards; by default it also gets the same budget of generated completions."""

    group_size: int = Field(8, ge=2, description="Completions per problem (G, TRL's num_generations).")
    steps: int | None = Field(
        None,
        ge=1,
        description="Optimizer steps; null = as many as generate the same number "
        "of completions as ES: iterations x es.population x "
        "sampling.samples_per_prompt / group_size.",
    )
    learning_rate: float = Field(1e-6, gt=0.0, allow_inf_nan=False, description="AdamW learning rate.")
    beta: float = Field(
        0.0, ge=0.0, description="KL coefficient against the initial model (0 = no reference model, TRL's default)."
    )
    epsilon: float = Field(0.2, gt=0.0, description="PPO-style clipping range.")
    temperature: float = Field(1.0, gt=0.0, description="Sampling temperature of the rollouts.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus threshold of the rollouts.")
    top_k: int = Field(0, ge=0, description="Sample the rollouts from the k most likely tokens only; 0 = off.")
    min_p: float = Field(0.0, ge=0.0, le=1.0, description="TRL's min_p of the rollouts; 0 = off.")
    repetition_penalty: float = Field(
        1.0, gt=0.0, allow_inf_nan=False, description="TRL's repetition_penalty of the rollouts; 1 = off."
    )
    micro_batch_size: int | None = Field(
        None,
        ge=1,
        description="Completions per forward/backward pass (gradient "
        "accumulation); must divide batch_size x group_size. "
        "null = the largest divisor <= 16.",
    )
    gradient_checkpointing: bool = Field(
        True,
        description="Recompute activations in the backward pass (TRL's "
        "default): less memory, about a third more compute.",
    )
    loss_type: str | None = Field(
        None, description="TRL loss_type (grpo, dapo, dr_grpo, bnpo...); null = TRL's default."
    )
