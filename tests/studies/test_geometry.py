"""Parameter geometry on hand-made weights where every number is known."""

from __future__ import annotations

import math

import pytest
import torch

from seedcast.studies.geometry import module_group, parameter_geometry


def test_module_groups_of_llama_names():
    assert module_group("model.layers.0.self_attn.q_proj.weight") == "attention"
    assert module_group("model.layers.3.mlp.down_proj.weight") == "mlp"
    assert module_group("model.layers.3.post_attention_layernorm.weight") == "norm"
    assert module_group("model.norm.weight") == "norm"
    assert module_group("model.embed_tokens.weight") == "embedding"
    assert module_group("lm_head.weight") == "embedding"
    assert module_group("rotary.inv_freq") == "other"


def test_distances_shares_and_changed_fraction_are_exact():
    base = {
        "model.layers.0.self_attn.q_proj.weight": torch.ones(4, 25),  # ||θ₀||² = 100
        "model.layers.0.mlp.up_proj.weight": torch.ones(300),
    }  # ||θ₀||² = 300
    tuned = {name: tensor.clone() for name, tensor in base.items()}
    tuned["model.layers.0.self_attn.q_proj.weight"][0, :4] += 0.5  # Δ² = 4 · 0.25 = 1
    tuned["model.layers.0.mlp.up_proj.weight"][:3] -= 1e-6  # below the threshold
    result = parameter_geometry(base, tuned, threshold=1e-5)
    assert result["relative_l2"] == pytest.approx(math.sqrt((1 + 3e-12) / 400))
    assert result["fraction_changed"] == pytest.approx(4 / 400)
    attention, mlp = result["groups"]["attention"], result["groups"]["mlp"]
    assert attention["relative_l2"] == pytest.approx(math.sqrt(1 / 100))
    assert attention["fraction_changed"] == pytest.approx(4 / 100) and mlp["fraction_changed"] == 0
    assert attention["share_of_change"] + mlp["share_of_change"] == pytest.approx(1.0)
    assert attention["share_of_change"] > 0.999999


def test_identical_models_are_at_distance_zero_and_mismatches_are_errors():
    base = {"a.weight": torch.randn(10)}
    assert parameter_geometry(base, {"a.weight": base["a.weight"].clone()})["relative_l2"] == 0.0
    with pytest.raises(ValueError, match="different parameters"):
        parameter_geometry(base, {"b.weight": torch.randn(10)})
    with pytest.raises(ValueError, match="shape"):
        parameter_geometry(base, {"a.weight": torch.randn(11)})
