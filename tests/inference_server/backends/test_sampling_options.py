"""top_k, min_p, repetition_penalty and stop strings on the hf backend, one member at a time and batched: the
batched members' own sampler filters as transformers' warpers do, a stop string ends and cuts an answer the same
way on both paths, and the filters that leave one token sample exactly what greedy decoding picks. The vllm backend
is held to the same answers in tests/inference_server/backends/test_vllm_sampling_options.py."""

from __future__ import annotations

import pytest
import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from seedcast.inference_server.backends.base import BatchMember, Sampling
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.backends.member_sampling import PerMemberSampler
from seedcast.inference_server.backends.stop_strings import cut_at_stop, tokens_until_stop

PROMPTS = ["What is 12 + 34? Reply with only the final number.", "0 1 2 3 4 5"]
GREEDY = Sampling(temperature=0.0, max_new_tokens=12)
MEMBERS = [BatchMember(seed=11, sigma=0.05, sign=1, rank=2), BatchMember(seed=11, sigma=0.05, sign=-1, rank=2)]


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=2, noise="table")


def _answers(completions) -> list[tuple[str, int, bool]]:
    return [(c.text, c.tokens, c.truncated) for group in completions for c in group]


@pytest.mark.parametrize(
    "options",
    [{"top_k": 7}, {"top_p": 0.6}, {"min_p": 0.3}, {"top_k": 20, "top_p": 0.8, "min_p": 0.05}],
    ids=["top_k", "top_p", "min_p", "all"],
)
def test_the_batched_sampler_filters_as_transformers_warpers_do(options):
    torch.manual_seed(0)
    scores = torch.randn(3, 50) * 3
    sampling = Sampling(temperature=0.7, **options)
    expected = TemperatureLogitsWarper(0.7)(None, scores.clone())
    for name, warper in (("top_k", TopKLogitsWarper), ("top_p", TopPLogitsWarper), ("min_p", MinPLogitsWarper)):
        if name in options:
            expected = warper(options[name])(None, expected)
    ours = PerMemberSampler([0], 3, sampling, torch.device("cpu"))._filtered(scores)
    torch.testing.assert_close(ours, torch.softmax(expected, dim=-1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("options", [{"top_k": 1}, {"min_p": 1.0}], ids=["top_k=1", "min_p=1"])
def test_a_filter_that_leaves_one_token_samples_the_greedy_answer(backend, options):
    sampled = Sampling(temperature=1.0, max_new_tokens=12, seed=5, samples_per_prompt=2, **options)
    greedy = [group[0].text for group in backend.generate(PROMPTS, GREEDY)]
    assert [c.text for c in (group[0] for group in backend.generate(PROMPTS, sampled))] == greedy
    unfiltered = Sampling(temperature=1.0, max_new_tokens=12, seed=5, samples_per_prompt=2)
    assert [group[0].text for group in backend.generate(PROMPTS, unfiltered)] != greedy  # the filter did it
    batched = backend.generate_members(MEMBERS, [3, 4], PROMPTS, sampled)
    for member, answers in zip(MEMBERS, batched, strict=True):
        backend.perturb(member.seed, member.sigma, member.sign, rank=member.rank)
        try:
            member_greedy = [group[0].text for group in backend.generate(PROMPTS, GREEDY)]
        finally:
            backend.restore()
        assert [group[1].text for group in answers] == member_greedy


def test_a_repetition_penalty_changes_greedy_answers_alike_serial_and_batched(backend):
    penalised = Sampling(temperature=0.0, max_new_tokens=12, repetition_penalty=3.0)
    plain = _answers(backend.generate(PROMPTS, GREEDY))
    assert _answers(backend.generate(PROMPTS, penalised)) != plain
    batched = backend.generate_members(MEMBERS[:1], [0], PROMPTS, penalised)
    backend.perturb(MEMBERS[0].seed, MEMBERS[0].sigma, MEMBERS[0].sign, rank=MEMBERS[0].rank)
    try:
        serial = backend.generate(PROMPTS, penalised)
    finally:
        backend.restore()
    assert _answers(batched[0]) == _answers(serial)


def test_a_stop_string_ends_the_answer_before_it_serial_and_batched(backend):
    varied = {"temperature": 0.0, "max_new_tokens": 12, "repetition_penalty": 3.0}  # the tiny model's answers vary
    plain = backend.generate(PROMPTS, Sampling(**varied))
    text = plain[0][0].text
    stop = text[4:6]
    assert len(text) > 8 and text.find(stop) == 4, f"pick another slice of {text!r}"
    stopped = backend.generate(PROMPTS, Sampling(**varied, stop=(stop, "never seen")))
    first = stopped[0][0]
    assert first.text == text[:4] and not first.truncated
    assert 1 <= first.tokens < plain[0][0].tokens
    assert stopped[1][0].text == cut_at_stop(plain[1][0].text, [stop])[0]
    batched = backend.generate_members(MEMBERS[:1], [0], PROMPTS, Sampling(**varied))
    batched_stopped = backend.generate_members(MEMBERS[:1], [0], PROMPTS, Sampling(**varied, stop=(stop,)))
    for whole, cut in zip(batched[0], batched_stopped[0], strict=True):
        assert cut[0].text == cut_at_stop(whole[0].text, [stop])[0]


def test_the_stop_helpers_cut_at_the_earliest_stop_and_count_its_tokens():
    assert cut_at_stop("abc STOP def END", ["END", "STOP"]) == ("abc ", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)
    tokens = ["ab", "c ", "ST", "OP", " d"]  # the stop string is completed by the fourth token

    def decode(ids):
        return "".join(tokens[i] for i in ids)

    assert tokens_until_stop(list(range(5)), decode, ["STOP"]) == 4
    assert tokens_until_stop(list(range(5)), decode, ["ab"]) == 1
    assert tokens_until_stop(list(range(5)), decode, ["zz"]) == 5
