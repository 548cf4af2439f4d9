"""The contract every backend keeps, parametrised over the backend registry (CPU builds here).

The vllm backend keeps the same contract in its own environment: test_vllm_engine.py beside this file
checks it through the engine (its weights live in vLLM's workers, in vLLM's fused layout).
"""

from __future__ import annotations

import pytest
import torch

from seedcast.inference_server.backends import BACKENDS, create_backend
from seedcast.inference_server.backends.base import Backend, Sampling
from seedcast.inference_server.noise.apply import apply_update_terms, weights_fingerprint
from seedcast.inference_server.noise.kinds import NOISE_KINDS, noise_source
from tests.spies import record_calls

CONTRACT_BACKENDS = ["hf"]


@pytest.fixture(
    params=[(backend, noise) for backend in CONTRACT_BACKENDS for noise in NOISE_KINDS],
    ids=lambda param: "-".join(param),
)
def make_backend(request, tiny_model_dir):
    backend_name, noise = request.param

    def make(dtype: str = "bfloat16") -> Backend:
        return create_backend(backend_name, tiny_model_dir, device="cpu", dtype=dtype, threads=2, noise=noise)

    return make


def _noise(backend: Backend):
    return noise_source(backend.info().noise)


def _inference_weights(backend) -> dict[str, torch.Tensor]:
    backend.sync_weights()  # read directly, past generate(): write a deferred restore first
    return {name: param.detach().clone() for name, param in backend.model.named_parameters()}


def test_every_registered_backend_is_under_contract():
    assert set(BACKENDS) <= {*CONTRACT_BACKENDS, "vllm"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_restore_is_bit_exact(make_backend, dtype):
    backend = make_backend(dtype)
    before = _inference_weights(backend)
    backend.perturb(seed=123, sigma=0.05, sign=-1)
    perturbed = _inference_weights(backend)
    assert any(not torch.equal(before[n], perturbed[n]) for n in before)
    backend.restore()
    after = _inference_weights(backend)
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_generation_after_a_restore_uses_the_restored_weights(make_backend):
    backend = make_backend()
    greedy = Sampling(temperature=0.0, max_new_tokens=8)
    prompts = ["What is 1 + 2?", "Say something.", "Count to five."]

    def texts() -> list[str]:
        return [group[0].text for group in backend.generate(prompts, greedy)]

    base = texts()
    backend.perturb(seed=1, sigma=0.5, sign=1)
    perturbed = texts()
    backend.restore()
    assert perturbed != base  # the perturbation shows in the answers, so the next check can fail
    assert texts() == base


def test_a_perturbation_right_after_a_restore_leaves_no_trace_of_the_first(make_backend):
    backend, fresh = make_backend(), make_backend()
    backend.perturb(seed=1, sigma=0.05, sign=1)
    backend.restore()  # deferred: the next perturbation overwrites every weight instead
    backend.perturb(seed=2, sigma=0.05, sign=-1)
    fresh.perturb(seed=2, sigma=0.05, sign=-1)
    assert all(
        torch.equal(a, b) for a, b in zip(_inference_weights(backend).values(), _inference_weights(fresh).values())
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_master_never_shares_memory_with_the_inference_weights(make_backend, dtype):
    backend = make_backend(dtype)
    master_pointers = {t.untyped_storage().data_ptr() for t in backend.master.values()}
    inference_pointers = {p.untyped_storage().data_ptr() for p in backend.model.parameters()}
    assert not master_pointers & inference_pointers
    assert all(t.dtype == torch.float32 for t in backend.master.values())


def test_perturbation_is_cast_of_master_plus_sigma_noise(make_backend):
    backend = make_backend("bfloat16")
    backend.perturb(seed=5, sigma=0.01, sign=1)
    params = dict(backend.model.named_parameters())
    for name, master in backend.master.items():
        expected = (master + 0.01 * _noise(backend).noise(5, name, master.shape)).to(torch.bfloat16)
        assert torch.equal(params[name].detach(), expected), name
    backend.restore()


@pytest.mark.parametrize("noise", NOISE_KINDS)
def test_pair_cache_gives_the_partner_bit_for_bit_and_never_outlives_an_update(tiny_model_dir, noise):
    from seedcast.inference_server.backends.hf import HFBackend

    cached = HFBackend(tiny_model_dir, device="cpu", dtype="bfloat16", threads=2, pair_cache=True, noise=noise)
    plain = HFBackend(tiny_model_dir, device="cpu", dtype="bfloat16", threads=2, noise=noise)
    partner_copies = record_calls(cached, "_write_partner")
    for sign in (1, -1):  # the first half of a pair, then its partner (served from the cache)
        for backend in (cached, plain):
            backend.perturb(seed=11, sigma=0.05, sign=sign)
        assert all(
            torch.equal(a, b) for a, b in zip(_inference_weights(cached).values(), _inference_weights(plain).values())
        )
        cached.restore()
        plain.restore()
    assert len(partner_copies) == 1
    cached.perturb(seed=12, sigma=0.05, sign=1)
    cached.restore()
    cached.apply_update([(3, 0.01)])  # the cached partner was computed from the old master
    cached.perturb(seed=12, sigma=0.05, sign=-1)
    cached.restore()
    cached.perturb(seed=12, sigma=0.04, sign=1)  # another sigma is another perturbation
    cached.restore()
    cached.perturb(seed=12, sigma=0.04, sign=1)  # the same sign again is not the partner
    cached.restore()
    assert len(partner_copies) == 1


def test_perturb_twice_without_restore_is_refused(make_backend):
    backend = make_backend()
    backend.perturb(1, 0.01)
    with pytest.raises(RuntimeError, match="restore"):
        backend.perturb(2, 0.01)
    backend.restore()


def test_a_perturbation_that_fails_midway_is_never_answered_from_the_weights_left_behind(make_backend):
    backend = make_backend("float16")  # stochastic rounding needs bfloat16: such a member fails
    before = _inference_weights(backend)
    backend.perturb(seed=1, sigma=0.05)  # a member that ran: its restore is deferred
    backend.restore()
    for _ in range(2):  # the failed member sent again fails again; it is not served the first member's weights
        with pytest.raises(ValueError, match="bfloat16"):
            backend.perturb(seed=2, sigma=0.05, stochastic_rounding=True)
        backend.restore()
    after = _inference_weights(backend)
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_many_updates_write_the_inference_weights_once_when_next_read(make_backend):
    backend = make_backend()
    writes = record_calls(backend, "_write_master")
    for step in range(50):  # what a Sync of 50 steps asks
        backend.apply_update([] if step % 2 else [(step, 1e-3)])
    assert writes == []  # the master moved 50 times; the weights were not written once yet
    after = _inference_weights(backend)  # a read writes cast(master), once
    assert len(writes) == 1 and all(
        torch.equal(after[name], backend.master[name].to(after[name].dtype)) for name in backend.master
    )


def test_live_update_equals_replayed_log(make_backend, tiny_model_dir):
    from seedcast.inference_server.model_source import load_model_and_tokenizer

    backend = make_backend()
    log = [[(1, 0.01), (2, -0.02)], [(3, 0.005)]]
    for terms in log:
        backend.apply_update(terms)
    model, _ = load_model_and_tokenizer(tiny_model_dir)
    master = {name: p.data for name, p in model.named_parameters()}
    for terms in log:
        apply_update_terms(master, terms, source=_noise(backend))
    assert weights_fingerprint(master) == backend.fingerprint()
    # and the inference weights were re-cast from the updated master
    name = next(iter(master))
    assert torch.equal(_inference_weights(backend)[name], master[name].to(torch.bfloat16))


def test_two_replicas_fed_the_same_updates_agree(make_backend):
    first, second = make_backend(), make_backend()
    assert first.fingerprint() == second.fingerprint()
    for backend in (first, second):
        backend.apply_update([(9, 0.1), (10, -0.1)])
    assert first.fingerprint() == second.fingerprint()
    first.apply_update([(11, 1e-3)])
    assert first.fingerprint() != second.fingerprint()


def test_small_updates_are_kept_in_the_float32_master(make_backend):
    backend = make_backend("bfloat16")
    before = backend.fingerprint()
    backend.apply_update([(4, 1e-7)])  # far below bf16 resolution of the weights
    assert backend.fingerprint() != before


def test_sampling_is_reproducible_per_seed(make_backend):
    backend = make_backend()
    sampling = Sampling(temperature=1.0, top_p=1.0, max_new_tokens=8, samples_per_prompt=3, seed=77)
    prompts = ["What is 1 + 2?", "Say something."]
    first = backend.generate(prompts, sampling)
    second = backend.generate(prompts, sampling)
    assert [[c.text for c in g] for g in first] == [[c.text for c in g] for g in second]
    assert len(first) == 2 and all(len(group) == 3 for group in first)
    assert all(0 < c.tokens <= 8 for g in first for c in g)


def test_info_reports_model_and_dtype(make_backend, tiny_model_dir):
    info = make_backend("float32").info()
    assert info.model == tiny_model_dir and info.dtype == "float32" and info.device == "cpu"
    assert info.parameters > 1000


def test_a_low_rank_member_is_cast_of_master_plus_sigma_low_rank_noise_and_restores_bit_exactly(make_backend):
    from seedcast.inference_server.noise.lowrank import noise_of_rank

    backend = make_backend("bfloat16")
    before = _inference_weights(backend)
    backend.perturb(seed=5, sigma=0.01, sign=-1, rank=2)
    params = _inference_weights(backend)
    source = noise_of_rank(_noise(backend), 2, backend.master)
    for name, master in backend.master.items():
        expected = (master - 0.01 * source.noise(5, name, master.shape)).to(torch.bfloat16)
        assert torch.equal(params[name], expected), name
    backend.restore()
    assert all(torch.equal(before[n], after) for n, after in _inference_weights(backend).items())
    backend.perturb(seed=5, sigma=0.01, sign=-1)  # the same seed at full rank is another perturbation
    assert any(not torch.equal(params[n], full) for n, full in _inference_weights(backend).items())
    backend.restore()


def test_a_low_rank_update_equals_the_replayed_log(make_backend, tiny_model_dir):
    from seedcast.inference_server.model_source import load_model_and_tokenizer
    from seedcast.inference_server.noise.apply import apply_rule

    backend = make_backend()
    log = [[(1, 0.01), (2, -0.02)], [(3, 0.005)]]
    for terms in log:
        backend.apply_update(terms, rank=4)
    model, _ = load_model_and_tokenizer(tiny_model_dir)
    master = {name: p.data for name, p in model.named_parameters()}
    full_rank = weights_fingerprint(master)
    for terms in log:
        apply_rule(master, terms, "plain", {}, {}, _noise(backend), rank=4)
    assert weights_fingerprint(master) == backend.fingerprint() != full_rank
    name = next(iter(master))
    assert torch.equal(_inference_weights(backend)[name], master[name].to(torch.bfloat16))


def test_the_pair_cache_serves_a_low_rank_partner_bit_for_bit_and_never_a_full_rank_one(tiny_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend

    cached = HFBackend(tiny_model_dir, device="cpu", dtype="bfloat16", threads=2, pair_cache=True, noise="table")
    plain = HFBackend(tiny_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="table")
    partner_copies = record_calls(cached, "_write_partner")
    for sign in (1, -1):
        for backend in (cached, plain):
            backend.perturb(seed=11, sigma=0.05, sign=sign, rank=1)
        assert all(
            torch.equal(a, b) for a, b in zip(_inference_weights(cached).values(), _inference_weights(plain).values())
        )
        cached.restore()
        plain.restore()
    cached.perturb(seed=12, sigma=0.05, sign=1, rank=1)
    cached.restore()
    cached.perturb(seed=12, sigma=0.05, sign=-1, rank=0)  # the same seed at another rank is no partner
    cached.restore()
    assert len(partner_copies) == 1
