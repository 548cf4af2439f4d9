"""Parameter geometry: how far, and where, training moved the weights away from the base model.

The ES papers report ES parameter changes much larger than GRPO's (in relative L2 norm) and spread
differently across modules; these numbers make that visible for any two checkpoints:

- relative L2 distance ||θ − θ₀|| / ||θ₀||, overall and per module group;
- the fraction of coordinates whose absolute change exceeds a threshold;
- each group's share of the squared change (where the update went).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

# Checked in order: the first group whose marker is in a parameter's name wins ("norm" before
# "attention", so post_attention_layernorm counts as a norm).
MODULE_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("norm", ("norm", "ln_")),
    ("embedding", ("embed", "wte", "wpe", "lm_head")),
    ("attention", ("self_attn", "attn", "q_proj", "k_proj", "v_proj", "o_proj")),
    ("mlp", ("mlp", "gate_proj", "up_proj", "down_proj", "fc")),
)
DEFAULT_THRESHOLD = 1e-5


def module_group(name: str) -> str:
    """The module group a parameter name belongs to (`other` when none matches)."""
    for group, markers in MODULE_GROUPS:
        if any(marker in name for marker in markers):
            return group
    return "other"


def _stats(base_sq: float, delta_sq: float, changed: int, count: int, total_delta_sq: float) -> dict:
    return {
        "relative_l2": math.sqrt(delta_sq / base_sq) if base_sq else math.nan,
        "l2_delta": math.sqrt(delta_sq),
        "fraction_changed": changed / count if count else math.nan,
        "share_of_change": delta_sq / total_delta_sq if total_delta_sq else 0.0,
        "parameters": count,
    }


@torch.no_grad()
def parameter_geometry(
    base: dict[str, torch.Tensor], tuned: dict[str, torch.Tensor], threshold: float = DEFAULT_THRESHOLD
) -> dict:
    """Distances of `tuned` from `base` (same names and shapes), overall and per module group."""
    missing = sorted(set(base) ^ set(tuned))
    if missing:
        raise ValueError(f"the two models have different parameters, e.g. {missing[:3]}")
    sums: dict[str, list[float]] = {}
    for name, base_tensor in base.items():
        tuned_tensor = tuned[name]
        if tuned_tensor.shape != base_tensor.shape:
            raise ValueError(f"parameter {name} has shape {tuple(tuned_tensor.shape)}, base {tuple(base_tensor.shape)}")
        before = base_tensor.double()
        delta = tuned_tensor.double() - before
        row = sums.setdefault(module_group(name), [0.0, 0.0, 0, 0])
        row[0] += float(before.square().sum())
        row[1] += float(delta.square().sum())
        row[2] += int((delta.abs() > threshold).sum())
        row[3] += delta.numel()
    total = [sum(row[i] for row in sums.values()) for i in range(4)]
    return {
        "threshold": threshold,
        **_stats(*total, total[1]),
        "groups": {group: _stats(*row, total[1]) for group, row in sorted(sums.items())},
    }


def state_of(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Float32 CPU copies of a model's parameters by name (tied weights once)."""
    return {name: param.detach().to("cpu", torch.float32) for name, param in model.named_parameters()}


def load_weights(path_or_spec: str | Path) -> dict[str, torch.Tensor]:
    """The float32 parameters of a model spec, model folder, GRPO run or ES run (replayed on the CPU)."""
    from seedcast.inference_server.model_source import load_model_and_tokenizer
    from seedcast.optimizer.run_kinds import GRPO_MODEL_DIR, run_kind

    path = Path(path_or_spec)
    if path.is_dir():
        kind = run_kind(path)
        if kind == "es":
            from seedcast.optimizer.export import replay_run

            return state_of(replay_run(path)[0])
        if kind == "grpo":
            path = path / GRPO_MODEL_DIR
    return state_of(load_model_and_tokenizer(str(path))[0])
