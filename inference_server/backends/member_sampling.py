"""Sampling for batched members: each member's rows draw from its own generator, seeded by its sampling seed.

One `generate` call over many members would otherwise sample every row from the one global generator, so a
member's answers would depend on which members share its batch, and a mirrored pair would lose its common
random numbers. `PerMemberSampler` is a logits processor that samples each member's block of rows itself
(temperature, then top-p) and leaves only the chosen token finite, so greedy decoding picks it.
"""

from __future__ import annotations

import torch


class PerMemberSampler:
    """A `transformers` logits processor: rows [i·R, (i+1)·R) sample with generator i (seed `seeds[i]`)."""

    def __init__(
        self, seeds: list[int], rows_per_member: int, temperature: float, top_p: float, device: torch.device
    ) -> None:
        if temperature <= 0:
            raise ValueError("greedy decoding needs no sampler")
        self.rows = rows_per_member
        self.temperature = temperature
        self.top_p = top_p
        self.generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]

    def _nucleus(self, probabilities: torch.Tensor) -> torch.Tensor:
        """Keep the smallest set of most likely tokens whose mass reaches top_p (the first always), renormalised."""
        ordered, order = probabilities.sort(dim=-1, descending=True)
        before = ordered.cumsum(dim=-1) - ordered  # the mass of the tokens more likely than each
        ordered = ordered.masked_fill(before >= self.top_p, 0.0)
        kept = torch.zeros_like(probabilities).scatter_(-1, order, ordered)
        return kept / kept.sum(dim=-1, keepdim=True)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        chosen = torch.empty(scores.shape[0], 1, dtype=torch.long, device=scores.device)
        for index, generator in enumerate(self.generators):
            rows = slice(index * self.rows, (index + 1) * self.rows)
            probabilities = torch.softmax(scores[rows].float() / self.temperature, dim=-1)
            if self.top_p < 1.0:
                probabilities = self._nucleus(probabilities)
            chosen[rows] = torch.multinomial(probabilities, 1, generator=generator)
        return torch.full_like(scores, -torch.inf).scatter_(1, chosen, 0.0)
