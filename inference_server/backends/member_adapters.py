"""Low-rank members as LoRA adapters, for vLLM's multi-LoRA batching: one adapter folder per member, from its seed.

A member's perturbation of a 2-D weight W is sign·σ·A·Bᵀ/√r (noise/lowrank.py). A PEFT LoRA adapter adds
lora_B · lora_A · (lora_alpha / r) to W's output, so the member is the adapter with

    lora_A = Bᵀ (r × n),   lora_B = sign·σ/√r · A (m × r),   lora_alpha = r

for every perturbed 2-D weight, under PEFT's names (`base_model.model.<module>.lora_A.weight`). vLLM fuses the
q/k/v and gate/up adapters of a layer as it fuses their weights, so each HF tensor keeps its own factors, as
on hf. An adapter carries linear layers only: the members it can express are those of
`es.lowrank_targets=linear`, whose embedding, LM head and 1-D tensors are frozen (they get no adapter).

The factors are drawn where the master lives (the vLLM worker); only seeds cross the wire, as for every member.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import torch

from seedcast.inference_server.backends.base import BatchMember
from seedcast.inference_server.noise.lowrank import LowRankNoise
from seedcast.inference_server.noise.source import NoiseSource

VLLM_RANK_SLOTS = (1, 8, 16, 32, 64, 128, 256)  # the max_lora_rank values vLLM accepts, up to es.rank's limit


def lora_rank_slot(rank: int) -> int:
    """The smallest max_lora_rank vLLM accepts that holds adapters of rank `rank`."""
    for slot in VLLM_RANK_SLOTS:
        if rank <= slot:
            return slot
    raise ValueError(f"a member adapter's rank is at most {VLLM_RANK_SLOTS[-1]}, got {rank}")


def adapted_tensors(shapes: Mapping[str, torch.Size], frozen: frozenset[str]) -> list[str]:
    """The tensors a member adapter perturbs: every 2-D one that is not frozen."""
    return [name for name, shape in shapes.items() if len(shape) == 2 and name not in frozen]


def member_adapter_tensors(
    member: BatchMember,
    shapes: Mapping[str, torch.Size],
    frozen: frozenset[str],
    noise: NoiseSource,
    device: torch.device | str = "cpu",
) -> dict[str, torch.Tensor]:
    """PEFT-named lora_A / lora_B tensors (float32, CPU) whose product is the member's perturbation; the factors
    are drawn on `device`, the master's, so they are the ones its updates use."""
    names = adapted_tensors(shapes, frozen)
    source = LowRankNoise(noise, member.rank, {name: shapes[name] for name in names})
    scale = member.sign * member.sigma / math.sqrt(member.rank)
    tensors = {}
    for name in names:
        a, b = source.factors(member.seed, name, device)
        module = "base_model.model." + name.removesuffix(".weight")
        tensors[f"{module}.lora_A.weight"] = b.t().contiguous().cpu()
        tensors[f"{module}.lora_B.weight"] = (a * scale).contiguous().cpu()
    return tensors


def write_member_adapter(
    folder: Path,
    member: BatchMember,
    shapes: Mapping[str, torch.Size],
    frozen: frozenset[str],
    noise: NoiseSource,
    device: torch.device | str = "cpu",
) -> None:
    """The member's adapter as a PEFT folder (adapter_config.json, adapter_model.safetensors)."""
    from safetensors.torch import save_file

    tensors = member_adapter_tensors(member, shapes, frozen, noise, device)
    modules = sorted({name.rsplit(".", 3)[-3] for name in tensors})  # ...<module>.lora_A.weight → <module>
    folder.mkdir(parents=True, exist_ok=False)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": member.rank,
        "lora_alpha": member.rank,  # scaling alpha / r = 1: lora_B carries sign·σ/√r
        "target_modules": modules,
        "bias": "none",
    }
    (folder / "adapter_config.json").write_text(json.dumps(config))
