"""Low-rank noise (EGGROLL): each 2-D weight's ε is A·Bᵀ/√r from the member's seed, 1-D weights keep full noise."""

from __future__ import annotations

import math

import pytest
import torch

from seedcast.inference_server.noise.apply import apply_rule, write_perturbed
from seedcast.inference_server.noise.gaussian import GAUSSIAN
from seedcast.inference_server.noise.kinds import NOISE_KINDS, noise_source
from seedcast.inference_server.noise.lowrank import CHUNK_ENTRIES, LowRankNoise, frozen_tensors, noise_of_rank

SHAPES = {
    "model.embed_tokens.weight": (600, 700),  # more than CHUNK_ENTRIES entries: several row blocks
    "model.layers.0.mlp.up_proj.weight": (48, 32),
    "model.norm.weight": (32,),
}


def _master() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return {name: torch.randn(shape, generator=generator) for name, shape in SHAPES.items()}


@pytest.mark.parametrize("kind", NOISE_KINDS)
@pytest.mark.parametrize("rank", [1, 4])
def test_a_2d_weights_noise_is_its_factors_product_of_that_rank(kind, rank):
    source = LowRankNoise(noise_source(kind), rank, SHAPES)
    name = "model.layers.0.mlp.up_proj.weight"
    a, b = source.factors(7, name)
    assert a.shape == (48, rank) and b.shape == (32, rank)
    noise = source.noise(7, name, SHAPES[name])
    assert torch.allclose(noise, a @ b.t() / math.sqrt(rank), atol=1e-5)
    assert torch.linalg.matrix_rank(noise).item() == rank
    assert torch.equal(noise, source.noise(7, name, SHAPES[name]))  # a pure function of (seed, name)
    assert not torch.equal(noise, source.noise(8, name, SHAPES[name]))


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_1d_weights_keep_the_full_rank_noise_of_the_runs_kind(kind):
    base = noise_source(kind)
    source = LowRankNoise(base, 2, SHAPES)
    assert torch.equal(source.noise(3, "model.norm.weight", (32,)), base.noise(3, "model.norm.weight", (32,)))
    assert not source.is_low_rank("model.norm.weight") and source.is_low_rank("model.embed_tokens.weight")


def test_row_blocks_hold_the_bits_of_the_whole_product_with_or_without_a_buffer():
    source = LowRankNoise(noise_source("gaussian"), 3, SHAPES)
    name = "model.embed_tokens.weight"
    numel = 600 * 700
    chunks = list(source.chunks(5, name, numel))
    assert len(chunks) > 1 and chunks[0][0] == 0 and chunks[-1][1] == numel
    assert all(end - start <= CHUNK_ENTRIES for start, end, _ in chunks)
    assert all(chunks[i][1] == chunks[i + 1][0] for i in range(len(chunks) - 1))
    whole = torch.cat([piece for _, _, piece in chunks])
    a, b = source.factors(5, name)
    assert torch.equal(whole, (a @ b.t()).mul_(1 / math.sqrt(3)).view(-1))  # the rows of one whole product
    buffer = torch.empty(numel)
    assert torch.equal(torch.cat([p.clone() for _, _, p in source.chunks(5, name, numel, buffer=buffer)]), whole)


def test_each_entry_is_a_unit_variance_sample_so_sigma_keeps_its_meaning():
    source = LowRankNoise(noise_source("gaussian"), 4, SHAPES)
    noise = torch.stack([source.noise(seed, "model.embed_tokens.weight", (600, 700)) for seed in range(4)])
    assert abs(noise.std().item() - 1.0) < 0.05 and abs(noise.mean().item()) < 0.05


def test_rank_zero_is_the_runs_own_full_rank_source():
    base = noise_source("table")
    assert noise_of_rank(base, 0, _master()) is base
    with pytest.raises(ValueError, match="rank >= 1"):
        LowRankNoise(base, 0, SHAPES)


@pytest.mark.parametrize("kind", NOISE_KINDS)
def test_a_low_rank_step_adds_its_members_low_rank_noise_and_replays_bit_for_bit(kind):
    terms = [(11, 0.02), (12, -0.03)]
    live, replay = _master(), _master()
    for master in (live, replay):
        apply_rule(master, terms, "plain", {}, {}, noise_source(kind), threads=2, rank=2)
    assert all(torch.equal(live[name], replay[name]) for name in live)
    source = LowRankNoise(noise_source(kind), 2, SHAPES)
    for name, before in _master().items():
        expected = before + sum(coeff * source.noise(seed, name, before.shape) for seed, coeff in terms)
        assert torch.allclose(live[name], expected, atol=1e-6), name
    delta = live["model.layers.0.mlp.up_proj.weight"] - _master()["model.layers.0.mlp.up_proj.weight"]
    assert torch.linalg.matrix_rank(delta).item() == 4  # two members of rank 2: the step is rank 4


def test_a_perturbation_and_its_mirrored_partner_come_from_one_draw():
    master = _master()["model.layers.0.mlp.up_proj.weight"]
    source = LowRankNoise(noise_source("gaussian"), 2, SHAPES)
    plus, minus = torch.empty_like(master), torch.empty_like(master)
    write_perturbed(master, source, 9, "model.layers.0.mlp.up_proj.weight", 0.1, [(plus, 1), (minus, -1)])
    noise = source.noise(9, "model.layers.0.mlp.up_proj.weight", master.shape)
    assert torch.equal(plus, noise * 0.1 + master) and torch.equal(minus, master - noise * 0.1)


def test_linear_targets_freeze_1d_tensors_and_vocabulary_rows_and_a_step_leaves_them_bit_for_bit():
    master = {
        "embed.weight": torch.randn(50, 8),
        "layer.proj.weight": torch.randn(12, 8),
        "layer.norm.weight": torch.randn(8),
        "head.weight": torch.randn(50, 8),
    }
    assert frozen_tensors("all", master, 50) == frozenset()
    frozen = frozen_tensors("linear", master, 50)
    assert frozen == {"embed.weight", "layer.norm.weight", "head.weight"}
    before = {name: tensor.clone() for name, tensor in master.items()}
    apply_rule(master, [(3, 0.5), (4, -0.25)], "plain", {}, {}, GAUSSIAN, threads=1, rank=2, frozen=frozen)
    assert all(torch.equal(master[name], before[name]) == (name in frozen) for name in master)
    with pytest.raises(ValueError, match="unknown low-rank targets"):
        frozen_tensors("some", master, 50)
