"""Sampling for batched members: each member's rows draw from its own generator, seeded by its sampling seed.

One `generate` call over many members would otherwise sample every row from the one global generator, so a
member's answers would depend on which members share its batch, and a mirrored pair would lose its common
random numbers. `PerMemberSampler` is a logits processor that samples each member's block of rows itself
(temperature, top-k, top-p, min-p: transformers' order; the repetition penalty is transformers' own processor,
applied before this one) and leaves only the chosen token finite, so greedy decoding picks it.
"""

from __future__ import annotations

import torch

from seedcast.inference_server.backends.base import Sampling


class PerMemberSampler:
    """A `transformers` logits processor: rows [i·R, (i+1)·R) sample with generator i (seed `seeds[i]`)."""

    def __init__(self, seeds: list[int], rows_per_member: int, sampling: Sampling, device: torch.device) -> None:
        if sampling.temperature <= 0:
            raise ValueError("greedy decoding needs no sampler")
        self.rows = rows_per_member
        self.temperature = sampling.temperature
        self.top_k = sampling.top_k
        self.top_p = sampling.top_p
        self.min_p = sampling.min_p
        self.generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]

    def _nucleus(self, probabilities: torch.Tensor) -> torch.Tensor:
        """Keep the smallest set of most likely tokens whose mass reaches top_p (the first always), renormalised."""
        ordered, order = probabilities.sort(dim=-1, descending=True)
        before = ordered.cumsum(dim=-1) - ordered  # the mass of the tokens more likely than each
        ordered = ordered.masked_fill(before >= self.top_p, 0.0)
        kept = torch.zeros_like(probabilities).scatter_(-1, order, ordered)
        return kept / kept.sum(dim=-1, keepdim=True)

    def _filtered(self, scores: torch.Tensor) -> torch.Tensor:
        """The sampling distribution of a block of rows' scores: temperature, top-k, top-p, min-p."""
        scores = scores.float() / self.temperature
        if 0 < self.top_k < scores.shape[-1]:
            kth = scores.topk(self.top_k, dim=-1).values[..., -1:]
            scores = scores.masked_fill(scores < kth, -torch.inf)
        probabilities = torch.softmax(scores, dim=-1)
        if self.top_p < 1.0:
            probabilities = self._nucleus(probabilities)
        if self.min_p > 0:
            floor = self.min_p * probabilities.max(dim=-1, keepdim=True).values
            probabilities = probabilities.masked_fill(probabilities < floor, 0.0)
            probabilities = probabilities / probabilities.sum(dim=-1, keepdim=True)
        return probabilities

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        chosen = torch.empty(scores.shape[0], 1, dtype=torch.long, device=scores.device)
        for index, generator in enumerate(self.generators):
            rows = slice(index * self.rows, (index + 1) * self.rows)
            probabilities = self._filtered(scores[rows])
            chosen[rows] = torch.multinomial(probabilities, 1, generator=generator)
        return torch.full_like(scores, -torch.inf).scatter_(1, chosen, 0.0)
