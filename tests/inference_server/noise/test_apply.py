"""Noise is a pure function of (seed, tensor name, shape); updates accumulate deterministically."""

import torch

from seedcast.inference_server.noise.apply import apply_update_terms, weights_fingerprint
from seedcast.inference_server.noise.gaussian import tensor_noise
from seedcast.proto.seeds import tensor_seed


def test_same_seed_same_noise():
    a = tensor_noise(42, "model.layers.0.mlp.up_proj.weight", (64, 32))
    b = tensor_noise(42, "model.layers.0.mlp.up_proj.weight", (64, 32))
    assert torch.equal(a, b)
    assert a.dtype == torch.float32


def test_two_tensors_of_one_shape_get_different_noise():
    a = tensor_noise(42, "model.layers.0.self_attn.q_proj.weight", (32, 32))
    b = tensor_noise(42, "model.layers.0.self_attn.o_proj.weight", (32, 32))
    assert not torch.equal(a, b)
    assert abs(torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1]) < 0.1


def test_different_seeds_differ_and_noise_is_standard_normal():
    a = tensor_noise(1, "w", (100_000,))
    b = tensor_noise(2, "w", (100_000,))
    assert not torch.equal(a, b)
    assert abs(a.mean().item()) < 0.02 and abs(a.std().item() - 1.0) < 0.02


def test_tensor_seed_is_stable_across_processes():
    # Pinned value: changing the hash would silently change every logged run's meaning.
    assert tensor_seed(7, "model.embed_tokens.weight") == 0x6C5D7E8B8C784ED8
    assert tensor_seed(8, "model.embed_tokens.weight") != tensor_seed(7, "model.embed_tokens.weight")
    assert 0 <= tensor_seed(7, "a") < 2**63


def test_out_buffer_gives_same_noise():
    buffer = torch.empty(10, 10)
    assert torch.equal(tensor_noise(3, "x", (10, 10), out=buffer), tensor_noise(3, "x", (10, 10)))


def test_update_is_deterministic_and_ordered():
    base = {"a": torch.randn(50, 20), "b": torch.randn(30)}
    terms = [(11, 0.5), (12, -0.25), (13, 1e-3)]
    first = {k: v.clone() for k, v in base.items()}
    second = {k: v.clone() for k, v in base.items()}
    apply_update_terms(first, terms, threads=2)
    apply_update_terms(second, terms, threads=1)
    assert weights_fingerprint(first) == weights_fingerprint(second)
    expected = base["a"] + 0.5 * tensor_noise(11, "a", (50, 20)) - 0.25 * tensor_noise(12, "a", (50, 20))
    expected += 1e-3 * tensor_noise(13, "a", (50, 20))
    assert torch.allclose(first["a"], expected, atol=1e-6)


def test_fingerprint_sees_one_changed_bit():
    weights = {"w": torch.zeros(1000)}
    before = weights_fingerprint(weights)
    weights["w"][500] = 1e-30
    assert weights_fingerprint(weights) != before
