"""Many low-rank members in one forward pass: each member's perturbation added to its own rows as a correction.

A batch holds G members' sequences, member-major: rows [i·R, (i+1)·R) belong to member i. The inference
weights stay cast(master); forward hooks add member i's perturbation to the output of every module holding a
trained parameter, for its rows only, without materialising any member's weights:

    Linear (weight W, m×n, low rank):  y += sign·σ/√r · A_i (B_iᵀ x)        two thin batched matmuls
    Linear bias b (1-D, full noise):   y += sign·σ · ε_i(b)
    Embedding (vocab×d, low rank):     y += sign·σ/√r · A_i[token] B_iᵀ     a row gather, one thin matmul
    RMSNorm scale w (1-D, full noise): y += sign·σ · ε_i(w) ⊙ x̂ = (sign·σ·ε_i(w) / w) ⊙ y   (x̂ recomputed
                                       from the input where some w is 0)

So y = (W + sign·σ·E_i) x for every sequence of member i, up to rounding, with A_i, B_i and ε_i the exact
values the member's materialised perturbation uses (noise/lowrank.py). A tied LM head is the embedding's
tensor: the head's Linear hook uses the same factors (logits += sign·σ/√r · (h B_i) A_iᵀ).

A model with a trained parameter no hook covers (an unknown norm, a convolution) cannot be batched:
`batchable_problem` names it, and such a server evaluates its low-rank members one at a time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from seedcast.inference_server.backends.base import BatchMember
from seedcast.inference_server.noise.lowrank import LowRankNoise
from seedcast.inference_server.noise.source import NoiseSource


def _is_rms_norm(module: nn.Module) -> bool:
    """An RMSNorm computing weight · x/√(mean(x²) + ε), as Llama's and Qwen2's do."""
    return type(module).__name__.endswith("RMSNorm") and hasattr(module, "variance_epsilon")


def _covered_parameters(model: nn.Module) -> dict[int, tuple[nn.Module, str]]:
    """id(parameter) → (module, attribute) for every parameter a hook can perturb per row."""
    covered: dict[int, tuple[nn.Module, str]] = {}
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.Embedding) or _is_rms_norm(module):
            for attribute, parameter in module.named_parameters(recurse=False):
                if attribute in ("weight", "bias"):
                    covered.setdefault(id(parameter), (module, attribute))
    return covered


def batchable_problem(model: nn.Module, names: Mapping[str, nn.Parameter]) -> str | None:
    """Why the trained parameters `names` (name → the model's parameter) cannot be perturbed per row, or None."""
    covered = _covered_parameters(model)
    missing = [name for name, parameter in names.items() if id(parameter) not in covered]
    if missing:
        return f"{len(missing)} trained parameters sit in modules batched members do not cover (e.g. {missing[0]})"
    return None


class LowRankBatch:
    """While entered, every forward pass of `model` adds member i's perturbation to rows [i·R, (i+1)·R)."""

    def __init__(
        self,
        model: nn.Module,
        params: Mapping[str, nn.Parameter],
        base: NoiseSource,
        members: list[BatchMember],
        rows_per_member: int,
        frozen: frozenset[str] = frozenset(),
    ) -> None:
        ranks = {member.rank for member in members}
        if len(ranks) != 1 or 0 in ranks:
            raise ValueError(f"members batched together must share one low rank >= 1, got ranks {sorted(ranks)}")
        self.model = model
        self.members = members
        self.rows = rows_per_member
        self.rank = ranks.pop()
        self.source = LowRankNoise(base, self.rank, {name: p.shape for name, p in params.items()}, frozen)
        # The parameters the members perturb: hooks leave the frozen ones (es.lowrank_targets) as they are.
        self.names = {id(parameter): name for name, parameter in params.items() if name not in frozen}
        self.device = next(iter(params.values())).device
        self.dtype = next(iter(params.values())).dtype
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._factors: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # name → (A: G×m×r, B: G×n×r)
        self._full: dict[str, torch.Tensor] = {}  # name → sign·σ·ε per member (G × numel) for 1-D tensors
        self._over_weight: dict[str, torch.Tensor | None] = {}  # name → sign·σ·ε / w per member (RMSNorm scales)
        signs = torch.tensor([float(m.sign) * m.sigma for m in members], dtype=torch.float32, device=self.device)
        self._low_scale = (signs / math.sqrt(self.rank)).view(-1, 1, 1)
        self._full_scale = signs.view(-1, 1)

    # ----- the members' noise, drawn once per batch ---------------------------------------------
    def _low_rank_factors(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(sign·σ/√r · A, B) stacked over the members: the scale folded into A once, not into every token."""
        if name not in self._factors:
            pairs = [self.source.factors(m.seed, name, self.device) for m in self.members]
            a = (torch.stack([pair[0] for pair in pairs]) * self._low_scale).to(self.dtype)
            b = torch.stack([pair[1] for pair in pairs]).to(self.dtype)
            self._factors[name] = (a, b)
        return self._factors[name]

    def _full_noise(self, name: str, shape: torch.Size) -> torch.Tensor:
        if name not in self._full:
            noise = torch.stack([self.source.noise(m.seed, name, shape, self.device) for m in self.members])
            self._full[name] = (noise.view(len(self.members), -1) * self._full_scale).to(self.dtype)
        return self._full[name]

    # ----- hooks ---------------------------------------------------------------------------------
    def _by_member(self, tensor: torch.Tensor) -> torch.Tensor:
        """(G·R, ..., features) → (G, R·..., features)."""
        return tensor.reshape(len(self.members), -1, tensor.shape[-1])

    def _linear_hook(self, module: nn.Linear, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        output = output.contiguous()  # (a no-op for F.linear's output) so the view below shares its storage
        by_member = self._by_member(output)  # a view: the corrections are added in place
        weight_name = self.names.get(id(module.weight))
        if weight_name is not None:
            a, b = self._low_rank_factors(weight_name)
            thin = torch.bmm(self._by_member(inputs[0]), b)  # G × L × r
            by_member.baddbmm_(thin, a.transpose(1, 2))  # a carries sign·σ/√r
        bias_name = self.names.get(id(module.bias)) if module.bias is not None else None
        if bias_name is not None:
            by_member.add_(self._full_noise(bias_name, module.bias.shape).unsqueeze(1))
        return output

    def _embedding_hook(self, module: nn.Embedding, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        name = self.names.get(id(module.weight))
        if name is None:
            return output
        a, b = self._low_rank_factors(name)
        ids = inputs[0].reshape(len(self.members), -1)
        rows = torch.gather(a, 1, ids.unsqueeze(-1).expand(-1, -1, a.shape[-1]))  # sign·σ/√r · A_i[token]: G × L × r
        correction = torch.bmm(rows, b.transpose(1, 2))
        return output + correction.view(output.shape)

    def _rms_norm_hook(self, module: nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor:
        name = self.names.get(id(module.weight))
        if name is None:
            return output
        if name not in self._over_weight:  # y = w ⊙ x̂, so σε ⊙ x̂ = (σε / w) ⊙ y wherever no w is 0
            weight = module.weight.to(torch.float32)
            noise = self._full_noise(name, module.weight.shape).to(torch.float32)
            self._over_weight[name] = None if bool((weight == 0).any()) else (noise / weight).to(self.dtype)
        over_weight = self._over_weight[name]
        if over_weight is not None:
            correction = self._by_member(output) * over_weight.unsqueeze(1)
            return output + correction.view(output.shape)
        hidden = inputs[0].to(torch.float32)
        normalised = (hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + module.variance_epsilon)).to(
            inputs[0].dtype
        )
        noise = self._full_noise(name, module.weight.shape).unsqueeze(1)  # G × 1 × d
        correction = self._by_member(normalised) * noise
        return output + correction.view(output.shape)

    def __enter__(self) -> LowRankBatch:
        for module in self.model.modules():
            if isinstance(module, nn.Linear):
                self._handles.append(module.register_forward_hook(self._linear_hook))
            elif isinstance(module, nn.Embedding):
                self._handles.append(module.register_forward_hook(self._embedding_hook))
            elif _is_rms_norm(module):
                self._handles.append(module.register_forward_hook(self._rms_norm_hook))
        return self

    def __exit__(self, *exc_info: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._factors.clear()
        self._full.clear()
        self._over_weight.clear()
