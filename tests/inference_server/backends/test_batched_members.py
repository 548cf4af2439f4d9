"""Batched low-rank members on the hf backend: each sequence computes with its own member's perturbation."""

from __future__ import annotations

import pytest
import torch

from seedcast.inference_server.backends.base import BatchMember, Sampling
from seedcast.inference_server.backends.batched_members import LowRankBatch, batchable_problem
from seedcast.inference_server.backends.hf import HFBackend

PROMPTS = ["What is 2 + 3?", "Name a colour.", "Count to four."]
MEMBERS = [
    BatchMember(seed=11, sigma=0.05, sign=1, rank=2),
    BatchMember(seed=11, sigma=0.05, sign=-1, rank=2),  # its mirrored partner
    BatchMember(seed=12, sigma=0.05, sign=1, rank=2),
]


@pytest.fixture(scope="module")
def float32_backend(tiny_model_dir):
    return HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=2, noise="table")


def _encoded(backend, repeat: int = 1):
    texts = backend.chat_texts(PROMPTS) * repeat
    return backend.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)


def test_a_batched_members_logits_equal_those_of_its_materialised_weights(float32_backend):
    _assert_batched_logits_equal_materialised(float32_backend)


def test_a_norm_scale_with_a_zero_entry_is_perturbed_from_the_normalised_input(tiny_model_dir):
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=2, noise="table")
    norm = next(name for name in backend.master if name.endswith("norm.weight"))
    backend.master[norm][0] = 0.0  # y = w ⊙ x̂ says nothing about x̂ there: the hook recomputes it
    backend.apply_update([])  # the inference weights follow the master at their next read
    _assert_batched_logits_equal_materialised(backend)


def test_linear_targets_batch_and_perturb_the_projections_only(tiny_model_dir):
    options = {"device": "cpu", "dtype": "float32", "threads": 2, "noise": "table"}
    backend = HFBackend(tiny_model_dir, **options, lowrank_targets="linear")
    frozen = backend.lowrank_frozen
    assert frozen and all(backend.master[n].dim() == 1 or n.endswith("embed_tokens.weight") for n in frozen)
    _assert_batched_logits_equal_materialised(backend)
    backend.perturb(11, 0.05, 1, rank=2)  # the frozen tensors keep cast(master), the projections move
    backend.sync_weights()
    assert all(torch.equal(backend.params[n], backend.master[n]) == (n in frozen) for n in backend.params)
    backend.restore()


def _assert_batched_logits_equal_materialised(backend) -> None:
    backend.sync_weights()
    frozen = getattr(backend, "lowrank_frozen", frozenset())
    batch = LowRankBatch(backend.model, backend.params, backend.noise, MEMBERS, len(PROMPTS), frozen)
    with torch.inference_mode(), batch:
        batched = backend.model(**_encoded(backend, len(MEMBERS))).logits
    base = backend.model(**_encoded(backend)).logits
    for index, member in enumerate(MEMBERS):
        backend.perturb(member.seed, member.sigma, member.sign, rank=member.rank)
        backend.sync_weights()
        with torch.inference_mode():
            materialised = backend.model(**_encoded(backend)).logits
        backend.restore()
        rows = batched[index * len(PROMPTS) : (index + 1) * len(PROMPTS)]
        assert (materialised - base).abs().max() > 1e-3  # the perturbation moves the logits ...
        torch.testing.assert_close(rows, materialised, atol=2e-5, rtol=1e-5)  # ... and the batch moves them alike


def test_a_members_greedy_answers_do_not_depend_on_its_batch_mates(float32_backend):
    greedy = Sampling(temperature=0.0, max_new_tokens=8)
    members = [BatchMember(seed, 0.5, sign, 2) for seed, sign in ((11, 1), (11, -1), (12, 1))]  # σ to move answers
    together = float32_backend.generate_members(members, [0, 0, 0], PROMPTS, greedy)
    alone = float32_backend.generate_members(members[2:], [0], PROMPTS, greedy)
    reordered = float32_backend.generate_members([members[2], members[0]], [0, 0], PROMPTS, greedy)
    assert together[2] == alone[0] == reordered[0] and together[0] == reordered[1]
    assert len({str(answers) for answers in together}) == 3  # three members, three sets of answers
    member = members[2]
    float32_backend.perturb(member.seed, member.sigma, member.sign, rank=member.rank)
    materialised = float32_backend.generate(PROMPTS, greedy)
    float32_backend.restore()
    assert [[c.text for c in p] for p in materialised] == [[c.text for c in p] for p in alone[0]]


def test_a_members_samples_follow_its_own_sampling_seed_whatever_shares_its_batch(float32_backend):
    sampled = Sampling(temperature=1.0, top_p=0.9, max_new_tokens=8, samples_per_prompt=2)
    together = float32_backend.generate_members(MEMBERS, [5, 5, 6], PROMPTS, sampled)
    alone = float32_backend.generate_members(MEMBERS[2:], [6], PROMPTS, sampled)
    assert together[2] == alone[0]
    other_seed = float32_backend.generate_members(MEMBERS[2:], [7], PROMPTS, sampled)
    assert other_seed[0] != alone[0]
    assert all(len(per_prompt) == 2 for answers in together for per_prompt in answers)


def test_the_batch_leaves_the_weights_and_the_model_as_they_were(float32_backend):
    before = float32_backend.fingerprint()
    plain = float32_backend.generate(PROMPTS, Sampling(temperature=0.0, max_new_tokens=8))
    float32_backend.generate_members(MEMBERS, [0, 0, 0], PROMPTS, Sampling(temperature=0.0, max_new_tokens=8))
    assert float32_backend.generate(PROMPTS, Sampling(temperature=0.0, max_new_tokens=8)) == plain
    assert float32_backend.fingerprint() == before
    assert not any(module._forward_hooks for module in float32_backend.model.modules())


def test_members_of_different_ranks_or_full_rank_members_are_not_batched(float32_backend):
    backend = float32_backend
    with pytest.raises(ValueError, match="one low rank"):
        LowRankBatch(backend.model, backend.params, backend.noise, [BatchMember(1, 0.1, 1, 0)], 1)
    with pytest.raises(ValueError, match="one low rank"):
        LowRankBatch(backend.model, backend.params, backend.noise, [MEMBERS[0], BatchMember(1, 0.1, 1, 3)], 1)


def test_a_model_with_a_parameter_no_hook_covers_is_not_batchable():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    problem = batchable_problem(model, dict(model.named_parameters()))
    assert problem is not None and "1.weight" in problem
    covered = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4))
    assert batchable_problem(covered, dict(covered.named_parameters())) is None
