"""The committed gRPC stubs match the .proto, and every proto element carries a comment."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parents[2] / "proto"


def test_stubs_are_up_to_date():
    result = subprocess.run([sys.executable, str(PROTO_DIR / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_every_service_rpc_message_and_field_is_commented():
    lines = (PROTO_DIR / "seedcast.proto").read_text().splitlines()
    declaration = re.compile(r"^\s*(service|rpc|message|oneof|(repeated\s+)?[\w.]+\s+\w+\s*=\s*\d+;)")
    for number, line in enumerate(lines):
        if declaration.match(line) and not line.strip().startswith("//"):
            assert lines[number - 1].strip().startswith("//"), f"line {number + 1} has no comment: {line.strip()}"


def test_stubs_import_from_the_installed_package():
    from seedcast.proto import seedcast_pb2, seedcast_pb2_grpc

    assert hasattr(seedcast_pb2_grpc, "InferenceServerStub")
    assert seedcast_pb2.MemberTask(seed=2**64 - 1).seed == 2**64 - 1
