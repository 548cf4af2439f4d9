"""`table` noise: a pure function of (seed, name), standard normal, chunked consistently everywhere."""

import pytest
import torch

from seedcast.inference_server.noise.apply import (
    apply_update_terms,
    perturbed_master,
    weights_fingerprint,
    write_perturbed,
)
from seedcast.inference_server.noise.gaussian import GAUSSIAN
from seedcast.inference_server.noise.kinds import noise_source
from seedcast.inference_server.noise.table import CHUNK_ENTRIES, TABLE_ENTRIES, TABLE_SEED, NoiseTable

TABLE = noise_source("table")
MULTI_CHUNK = (3 * CHUNK_ENTRIES + 1234,)  # three whole chunks and a ragged tail


def test_the_table_is_a_pure_function_of_its_seed():
    assert noise_source("table") is TABLE  # one table per process
    table = TABLE.table()
    assert table.shape == (TABLE_ENTRIES,) and table.dtype == torch.float32
    rebuilt = torch.randn(TABLE_ENTRIES, generator=torch.Generator().manual_seed(TABLE_SEED))
    assert torch.equal(table, rebuilt)
    assert NoiseTable().table() is not table and torch.equal(NoiseTable().table(), table)


def test_same_seed_and_name_give_the_same_noise_and_anything_else_differs():
    a = TABLE.noise(42, "model.layers.0.mlp.up_proj.weight", MULTI_CHUNK)
    assert torch.equal(a, TABLE.noise(42, "model.layers.0.mlp.up_proj.weight", MULTI_CHUNK))
    assert not torch.equal(a, TABLE.noise(43, "model.layers.0.mlp.up_proj.weight", MULTI_CHUNK))
    assert not torch.equal(a, TABLE.noise(42, "model.layers.0.mlp.down_proj.weight", MULTI_CHUNK))
    assert not torch.equal(a, GAUSSIAN.noise(42, "model.layers.0.mlp.up_proj.weight", MULTI_CHUNK))


def test_noise_is_standard_normal_and_chunks_are_uncorrelated():
    noise = TABLE.noise(7, "w", MULTI_CHUNK)
    assert abs(noise.mean().item()) < 0.01 and abs(noise.std().item() - 1.0) < 0.01
    chunks = noise[: 3 * CHUNK_ENTRIES].view(3, CHUNK_ENTRIES)
    correlations = torch.corrcoef(chunks)
    assert (correlations - torch.eye(3)).abs().max() < 0.02
    other = TABLE.noise(8, "w", MULTI_CHUNK)
    assert abs(torch.corrcoef(torch.stack([noise, other]))[0, 1]) < 0.02


def test_chunks_are_read_only_views_and_cover_the_tensor_in_order():
    pieces = list(TABLE.chunks(3, "w", MULTI_CHUNK[0]))
    assert [(start, end) for start, end, _ in pieces] == [
        (0, CHUNK_ENTRIES),
        (CHUNK_ENTRIES, 2 * CHUNK_ENTRIES),
        (2 * CHUNK_ENTRIES, 3 * CHUNK_ENTRIES),
        (3 * CHUNK_ENTRIES, MULTI_CHUNK[0]),
    ]
    assert all(
        piece.untyped_storage().data_ptr() == TABLE.table().untyped_storage().data_ptr() for _, _, piece in pieces
    )
    assert not TABLE.fresh and GAUSSIAN.fresh


@pytest.mark.parametrize("kind", ["gaussian", "table"])
def test_perturbation_and_its_mirror_are_cast_of_master_plus_and_minus_sigma_noise(kind):
    source = noise_source(kind)
    master = torch.randn(MULTI_CHUNK, generator=torch.Generator().manual_seed(0))
    plus, minus = torch.empty_like(master, dtype=torch.bfloat16), torch.empty_like(master, dtype=torch.bfloat16)
    write_perturbed(master, source, 5, "w", -0.01, [(plus, 1), (minus, -1)])
    step = -0.01 * source.noise(5, "w", MULTI_CHUNK)
    assert torch.equal(plus, (step + master).to(torch.bfloat16))
    assert torch.equal(minus, (master - step).to(torch.bfloat16))
    assert torch.equal(perturbed_master(master, source, 5, "w", -0.01), step + master)


def test_table_updates_replay_bit_for_bit_and_follow_the_noise():
    base = {"a": torch.randn(MULTI_CHUNK), "b": torch.randn(300)}
    terms = [(11, 0.5), (12, -0.25), (13, 1e-3)]
    first = {k: v.clone() for k, v in base.items()}
    second = {k: v.clone() for k, v in base.items()}
    apply_update_terms(first, terms, threads=2, source=TABLE)
    apply_update_terms(second, terms, threads=1, source=TABLE)
    assert weights_fingerprint(first) == weights_fingerprint(second)
    expected = base["a"].clone()
    for seed, coeff in terms:
        expected += coeff * TABLE.noise(seed, "a", MULTI_CHUNK)
    assert torch.allclose(first["a"], expected, atol=1e-6)
    term_by_term = base["a"].clone()  # one pass per term, as the update was applied before it went chunk-major
    for seed, coeff in terms:
        term_by_term.add_(TABLE.noise(seed, "a", MULTI_CHUNK), alpha=coeff)
    assert torch.equal(first["a"], term_by_term)  # the same bits: each coordinate gets its terms in order
    gaussian = {k: v.clone() for k, v in base.items()}
    apply_update_terms(gaussian, terms, source=GAUSSIAN)
    assert weights_fingerprint(gaussian) != weights_fingerprint(first)


def test_an_unknown_noise_kind_names_the_known_ones():
    with pytest.raises(ValueError, match="gaussian, table"):
        noise_source("uniform")
