"""A low-rank member as a LoRA adapter (vLLM's batching): the adapter's product is exactly the member's noise."""

from __future__ import annotations

import json

import pytest
import torch

from seedcast.inference_server.backends.base import BatchMember
from seedcast.inference_server.backends.member_adapters import (
    lora_rank_slot,
    member_adapter_tensors,
    write_member_adapter,
)
from seedcast.inference_server.noise.kinds import noise_source
from seedcast.inference_server.noise.lowrank import LowRankNoise, frozen_tensors

SHAPES = {
    "model.embed_tokens.weight": torch.Size([50, 16]),
    "model.layers.0.self_attn.q_proj.weight": torch.Size([16, 16]),
    "model.layers.0.mlp.down_proj.weight": torch.Size([16, 24]),
    "model.layers.0.input_layernorm.weight": torch.Size([16]),
}


@pytest.mark.parametrize("kind", ["gaussian", "table"])
def test_an_adapters_product_is_the_members_scaled_low_rank_noise(kind):
    noise = noise_source(kind)
    frozen = frozen_tensors("linear", {name: torch.empty(shape) for name, shape in SHAPES.items()}, 50)
    member = BatchMember(seed=7, sigma=0.03, sign=-1, rank=3)
    tensors = member_adapter_tensors(member, SHAPES, frozen, noise)
    source = LowRankNoise(noise, 3, SHAPES)
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight"):
        module = "base_model.model." + name.removesuffix(".weight")
        a, b = tensors[f"{module}.lora_A.weight"], tensors[f"{module}.lora_B.weight"]
        assert a.shape == (3, SHAPES[name][1]) and b.shape == (SHAPES[name][0], 3)
        expected = -0.03 * source.noise(7, name, SHAPES[name])
        torch.testing.assert_close(b @ a, expected, atol=1e-6, rtol=1e-5)
    assert len(tensors) == 4  # the embedding and the norm are frozen: no adapter for them


def test_an_adapter_folder_is_a_peft_lora_with_unit_scaling(tmp_path):
    member = BatchMember(seed=1, sigma=0.1, sign=1, rank=2)
    write_member_adapter(
        tmp_path / "member", member, SHAPES, frozenset({"model.embed_tokens.weight"}), noise_source("table")
    )
    config = json.loads((tmp_path / "member" / "adapter_config.json").read_text())
    assert config["r"] == config["lora_alpha"] == 2 and config["peft_type"] == "LORA"
    assert config["target_modules"] == ["down_proj", "q_proj"]
    assert (tmp_path / "member" / "adapter_model.safetensors").stat().st_size > 0


def test_vllm_rank_slots_hold_the_rank():
    assert [lora_rank_slot(r) for r in (1, 2, 8, 9, 256)] == [1, 8, 8, 16, 256]
    with pytest.raises(ValueError):
        lora_rank_slot(257)
