"""The telemetry scheme and the wire agree."""

from __future__ import annotations

from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field


def test_member_phases_are_the_fields_of_the_wire_timings():
    assert [phase_field(phase) for phase in MEMBER_PHASES] == [f.name for f in pb.Timings.DESCRIPTOR.fields]
