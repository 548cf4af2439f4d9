"""Generate (or check) the Python gRPC stubs beside `seedcast.proto`.

The stubs are committed so that `pip install` needs no code generator. CI runs
`python proto/generate.py --check`, which fails when the committed stubs differ from what the
pinned `grpcio-tools` makes of the current `.proto`.

    python proto/generate.py          # regenerate proto/seedcast_pb2*.py
    python proto/generate.py --check  # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO_FILE = "seedcast.proto"
# The import path the generated modules use for each other: `seedcast.proto.seedcast_pb2`.
VIRTUAL_DIR = "seedcast/proto"
GENERATED = ("seedcast_pb2.py", "seedcast_pb2.pyi", "seedcast_pb2_grpc.py")


def generate_into(out_dir: Path) -> None:
    """Run protoc from grpcio-tools and write the stubs under `out_dir/seedcast/proto/`."""
    from grpc_tools import protoc

    args = [
        "protoc",
        f"-I{VIRTUAL_DIR}={PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"{VIRTUAL_DIR}/{PROTO_FILE}",
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed; see the messages above")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if stubs are stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        generate_into(Path(tmp))
        stale = []
        for name in GENERATED:
            fresh = (Path(tmp) / VIRTUAL_DIR / name).read_text()
            committed = PROTO_DIR / name
            if not committed.exists() or committed.read_text() != fresh:
                stale.append(name)
                if not args.check:
                    committed.write_text(fresh)
    if args.check and stale:
        print(f"stale gRPC stubs: {', '.join(stale)}; run `python proto/generate.py`", file=sys.stderr)
        return 1
    print("stubs up to date" if not stale else f"regenerated: {', '.join(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
