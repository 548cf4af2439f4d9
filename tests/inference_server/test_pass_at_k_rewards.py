"""MemberTask.pass_at_k (es.fitness=pass_at_k): a prompt's reward is the unbiased pass@k of its samples instead of
their mean, computed by the server with the estimator `seedcast eval` uses; a k above the samples per prompt, or
batch mates that disagree on k, are refused as INVALID_ARGUMENT."""

from __future__ import annotations

import math

import grpc
import pytest

from seedcast.evaluators.pass_at_k import pass_at_k
from seedcast.inference_server.member import prompt_rewards
from seedcast.inference_server.validation import Limits, RequestError, check_batched, check_task
from seedcast.proto import seedcast_pb2 as pb
from tests.inference_server.test_servicer import backend, with_server  # noqa: F401  (backend: the fixture)

DIGITS = pb.PromptBatch(
    iteration=0,
    evaluator="tests.tiny_model:contains_digit_reward",  # pass or fail on any text
    problems=[pb.Problem(prompt=f"Count to {n}.", reference="") for n in range(4)],
)


def test_each_prompts_reward_is_the_pass_at_k_of_its_samples():
    samples = [[1.0, 0.0, 0.0, 1.0], [0.0] * 4, [1.0, None, math.nan, 1.0], [0.5, 1.0, 0.0, 0.0]]
    rewards = prompt_rewards(samples, pass_at_k=2)
    assert rewards[:3] == [pass_at_k(4, 2, 2), 0.0, 1.0]  # unscorable samples are left out: 2 of 2 pass
    assert rewards[3] == pass_at_k(4, 1, 2)  # a sample passes at reward 1 only
    assert math.isnan(prompt_rewards(samples, pass_at_k=3)[2])  # fewer than k scorable samples
    assert prompt_rewards(samples)[0] == 0.5  # k = 0: the mean, as before


def _member(pass_at_k: int, samples: int = 4, seed: int = 3) -> pb.MemberTask:
    sampling = pb.SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=6, samples_per_prompt=samples, seed=seed)
    return pb.MemberTask(iteration=0, seed=11, sign=1, sigma=0.01, sampling=sampling, pass_at_k=pass_at_k)


def test_a_k_above_the_samples_and_batch_mates_with_other_ks_are_refused():
    with pytest.raises(RequestError) as raised:
        check_task(_member(pass_at_k=5), DIGITS, 0, Limits())
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and "samples_per_prompt is 4" in raised.value.message
    check_task(_member(pass_at_k=4), DIGITS, 0, Limits())
    mates = [_member(pass_at_k=2), _member(pass_at_k=3)]
    for task in mates:
        task.rank = 1
    with pytest.raises(RequestError, match="share pass_at_k"):
        check_batched(mates, batches_members=True)


def test_a_served_member_answers_the_pass_at_k_of_the_samples_it_drew(backend):  # noqa: F811
    async def scenario(stub, channel, running):
        call = stub.Evaluate()
        await call.write(pb.EvaluateRequest(batch=DIGITS))
        answers = []
        for k in (0, 2, 4):  # the same member and sampling seed: the same samples, aggregated three ways
            await call.write(pb.EvaluateRequest(task=_member(pass_at_k=k)))
            answers.append((await call.read()).result)
        await call.done_writing()
        return answers

    means, pass_2, pass_4 = (list(result.rewards) for result in with_server(backend, scenario))
    passing = [round(mean * 4) for mean in means]  # binary rewards: the mean of 4 samples is passes / 4
    assert 0 < sum(passing) < 16, "the test needs prompts with some passing samples and some failing"
    assert pass_2 == pytest.approx([pass_at_k(4, c, 2) for c in passing], abs=1e-6)
    assert pass_4 == [1.0 if c else 0.0 for c in passing]
