"""A request's sampling filters are checked before anything generates: each bad value is refused as
INVALID_ARGUMENT naming the field (the fuzzing in test_hostile_input.py sends random ones to a live server)."""

from __future__ import annotations

import grpc
import pytest

from seedcast.inference_server.validation import Limits, RequestError, sampling_from_proto
from seedcast.proto import seedcast_pb2 as pb


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"min_p": 1.5}, "sampling.min_p"),
        ({"min_p": float("nan")}, "sampling.min_p"),
        ({"repetition_penalty": -1.0}, "sampling.repetition_penalty"),
        ({"repetition_penalty": float("inf")}, "sampling.repetition_penalty"),
        ({"stop": ["x"] * 17}, "sampling.stop"),
        ({"stop": ["ok", ""]}, "sampling.stop[1]"),
        ({"stop": ["x" * 257]}, "sampling.stop[0]"),
    ],
)
def test_bad_sampling_filters_are_refused_by_name(options, named):
    with pytest.raises(RequestError) as raised:
        sampling_from_proto(pb.SamplingParams(top_p=1, max_new_tokens=1, samples_per_prompt=1, **options), Limits())
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and named in raised.value.message


def test_unset_filters_are_off_and_set_ones_arrive():
    plain = sampling_from_proto(pb.SamplingParams(top_p=1, max_new_tokens=1, samples_per_prompt=1), Limits())
    assert plain.filters() == {} and plain.repetition_penalty == 1.0 and plain.stop == ()
    message = pb.SamplingParams(
        top_p=1, max_new_tokens=1, samples_per_prompt=1, top_k=3, min_p=0.5, repetition_penalty=2, stop=["a", "bc"]
    )
    assert sampling_from_proto(message, Limits()).filters() == {"top_k": 3, "min_p": 0.5, "repetition_penalty": 2.0}
    assert sampling_from_proto(message, Limits()).stop == ("a", "bc")
