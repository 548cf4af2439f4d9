"""The `sampling` section of a run's config: how members generate, and its form on the wire."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from seedcast.optimizer.config_section import Section
from seedcast.proto import seedcast_pb2 as pb


class SamplingConfig(Section):
    """How members generate. Greedy (temperature 0) keeps rewards a function of the weights alone."""

    temperature: float = Field(0.0, ge=0.0, description="0 = greedy.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling threshold.")
    max_new_tokens: int = Field(16, ge=1, le=8192, description="Tokens per completion at most.")
    samples_per_prompt: int = Field(1, ge=1, le=256, description="Completions per problem and member.")
    top_k: int = Field(0, ge=0, description="Sample from the k most likely tokens only; 0 = off.")
    min_p: float = Field(
        0.0, ge=0.0, le=1.0, description="Drop tokens less likely than min_p x the most likely one; 0 = off."
    )
    repetition_penalty: float = Field(
        1.0,
        gt=0.0,
        allow_inf_nan=False,
        description="Penalise tokens already in the prompt or completion (transformers' and vLLM's rule); 1 = off.",
    )
    stop: list[Annotated[str, StringConstraints(min_length=1, max_length=256)]] = Field(
        default_factory=list,
        max_length=16,
        description="End a completion where it first contains one of these strings (cut off before scoring).",
    )

    def to_proto(self, temperature: float | None = None) -> pb.SamplingParams:
        """These settings on the wire (at another temperature where given: the greedy evaluation)."""
        return pb.SamplingParams(
            temperature=self.temperature if temperature is None else temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            samples_per_prompt=self.samples_per_prompt,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            stop=self.stop,
        )
