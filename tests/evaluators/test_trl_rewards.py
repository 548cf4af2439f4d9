"""Reward functions in TRL's convention: the `trl:` spec, one call per function over a batch with the problem's
other columns as keyword arguments, any scale, summed with weights, None skipped; the columns travel from the
data file through the wire to the server's evaluator."""

from __future__ import annotations

import json

import grpc
import pytest

from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.datasets import DatasetSpec, load_problems
from seedcast.evaluators.registry import EvaluatorSpecError, load_evaluator
from seedcast.evaluators.trl_rewards import TRLRewardEvaluator, WeightedFunction, format_spec, parse_spec
from seedcast.inference_server.problem_inputs import problem_inputs
from seedcast.inference_server.validation import Limits, RequestError, check_problems
from seedcast.proto import seedcast_pb2 as pb


def _samples(targets: list[str | None]) -> list[ScoredSample]:
    return [
        ScoredSample(f"p{i}", f"answer {i}", "", {} if target is None else {"target": target})
        for i, target in enumerate(targets)
    ]


def test_a_spec_round_trips_with_weights_and_remote_parts():
    parts = [("tests.trl_style_rewards:one_per_answer", 1.0), ("remote:http://127.0.0.1:9/reward/0/t", 0.25)]
    spec = format_spec(parts)
    assert spec == "trl:tests.trl_style_rewards:one_per_answer+0.25*remote:http://127.0.0.1:9/reward/0/t"
    assert parse_spec(spec) == parts


@pytest.mark.parametrize("spec", ["trl:nocolon", "trl:x*a:b", "trl:nan*a:b", "trl:a:b:c", "trl:remote:ftp://x"])
def test_a_bad_spec_says_what_a_part_is(spec):
    with pytest.raises(EvaluatorSpecError, match=r"WEIGHT\*|weight"):
        load_evaluator(spec)


def test_an_unimportable_function_fails_when_the_evaluator_is_built():
    with pytest.raises(EvaluatorSpecError, match="no function 'nope'"):
        load_evaluator("trl:tests.trl_style_rewards:nope")


def test_functions_get_the_batch_and_its_columns_and_their_weighted_sum_counts():
    evaluator = load_evaluator("trl:2*tests.trl_style_rewards:one_per_answer+0.5*tests.trl_style_rewards:target_length")
    assert evaluator.score_batch(_samples(["abcd", None, "ab"])) == [2.0 + 2.0, 2.0, 2.0 + 1.0]  # any scale


def test_a_sample_no_function_scores_is_not_scorable_and_bad_values_are_errors():
    def none_for_odd(prompts, completions, **_):
        return [None if i % 2 else -3.5 for i in range(len(completions))]

    assert TRLRewardEvaluator([WeightedFunction("f", none_for_odd)]).score_batch(_samples([None] * 3)) == [
        -3.5,
        None,
        -3.5,
    ]
    with pytest.raises(ValueError, match="returned 1 rewards for 2"):
        TRLRewardEvaluator([WeightedFunction("short", lambda prompts, completions: [1.0])]).score_batch(
            _samples([None] * 2)
        )
    with pytest.raises(ValueError, match="must be finite"):
        TRLRewardEvaluator([WeightedFunction("inf", lambda prompts, completions: [float("inf")])]).score_batch(
            _samples([None])
        )


def test_a_data_file_keeps_its_other_columns_only_for_such_rewards(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"prompt": "q1", "target": "abc", "meta": {"level": 2}}) + "\n")
    kept = load_problems(DatasetSpec(kind="jsonl", path=str(data), prompt_field="prompt", keep_columns=True))
    assert json.loads(kept[0].columns) == {"target": "abc", "meta": {"level": 2}} and kept[0].reference == ""
    with pytest.raises(Exception, match="missing field 'answer'"):  # a reference is needed by the others
        load_problems(DatasetSpec(kind="jsonl", path=str(data), prompt_field="prompt"))


def test_the_wire_carries_columns_as_a_json_object_and_refuses_anything_else():
    problems = [pb.Problem(prompt="a", columns='{"target": "x"}'), pb.Problem(prompt="b")]
    check_problems(problems, Limits())
    assert problem_inputs(pb.PromptBatch(problems=problems), None).scoring.columns == [{"target": "x"}, {}]
    assert problem_inputs(pb.PromptBatch(problems=[pb.Problem(prompt="a")]), None).scoring.columns is None
    for columns in ("[1, 2]", "not json"):
        with pytest.raises(RequestError) as raised:
            check_problems([pb.Problem(prompt="a", columns=columns)], Limits())
        assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and "columns" in raised.value.message
