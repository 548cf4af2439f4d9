"""What a member's answer says beyond its rewards: how many of its answers were cut at max_new_tokens."""

from __future__ import annotations

from seedcast.evaluators.base import ScoringInputs
from seedcast.evaluators.registry import load_evaluator
from seedcast.inference_server.backends.base import Completion, Sampling
from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.member import evaluate_member
from seedcast.inference_server.member_answers import member_result
from seedcast.proto import seedcast_pb2 as pb


class TruncatingTestBackend(SimulatedLatencyTestBackend):
    """A test double whose answers to a prompt containing "long" run out of tokens; the others end."""

    def generate(self, prompts, sampling, system_prompt="", with_entropy=False, stop=None):
        n, tokens = sampling.samples_per_prompt, sampling.max_new_tokens
        return [[Completion(text="1", tokens=tokens, truncated="long" in prompt)] * n for prompt in prompts]


def test_a_members_truncated_answers_are_counted_and_sent():
    outcome = evaluate_member(
        TruncatingTestBackend(),
        load_evaluator("tests.tiny_model:digit_fraction_reward"),
        prompts=["a long story", "2 + 3?", "another long one"],
        scoring=ScoringInputs(["a long story", "2 + 3?", "another long one"], ["1", "5", "1"]),
        system_prompt="",
        seed=3,
        sigma=0.1,
        sign=1,
        sampling=Sampling(temperature=1.0, max_new_tokens=4, samples_per_prompt=3),
    )
    assert outcome.truncated == 6  # 2 prompts × 3 samples
    task = pb.MemberTask(iteration=0, member=1, summary_only=True)
    assert member_result(task, outcome).result.truncated_answers == 6
