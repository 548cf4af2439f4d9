"""Token entropy recorded while a Hugging Face model generates, instead of in a second forward pass.

At every forward call `generate` makes (the prefill, then one per new token) a forward hook takes the logits of
each row's last position, the model's next-token distribution before any sampler transform (temperature, top-p),
and keeps its entropy in nats: the entropy of the policy itself at temperature 1. These are the very logits the
sampler draws from, so sampling is untouched, and the numbers equal a separate forward pass over prompt +
completion up to float rounding (tests/studies/test_evaluate.py checks both), at none of its cost: that pass was
about as much compute as the generation itself.
"""

from __future__ import annotations

import torch


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of the distributions the last dimension's logits define, at temperature 1, in float32."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return -(log_probs.exp() * log_probs).sum(-1)


class GenerationEntropy:
    """A context manager around `model.generate`: afterwards `means(lengths)` gives each row's mean token entropy
    over its first `length` completion tokens (positions past a row's end, padding after its EOS, are ignored)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.steps: list[torch.Tensor] = []  # one (batch,) tensor per forward call
        self._handle = None

    def __enter__(self) -> GenerationEntropy:
        self.steps.clear()
        self._handle = self.model.register_forward_hook(self._record)
        return self

    def __exit__(self, *exc_info) -> None:
        self._handle.remove()

    def _record(self, module, args, output) -> None:
        self.steps.append(token_entropy(output.logits[:, -1]))

    def means(self, lengths: list[int]) -> list[float]:
        """Mean entropy over each row's completion tokens (token j's distribution comes from forward call j)."""
        if lengths and max(lengths) > len(self.steps):
            raise RuntimeError(f"{len(self.steps)} forward calls recorded for a completion of {max(lengths)} tokens")
        entropy = torch.stack(self.steps, dim=1) if self.steps else torch.empty(len(lengths), 0)
        return [float(entropy[row, :length].mean()) for row, length in enumerate(lengths)]
