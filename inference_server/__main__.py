"""`python -m seedcast.inference_server [flags]`: run one inference server, as `seedcast serve` does.

This is how local fleets and `seedcast.start_server_process` start servers: a server process never
loads the optimizer or the command line above it. The flags are ServeConfig's (`--help` lists them).

    python -m seedcast.inference_server --backend hf --model smollm2-135m-instruct --port 50051
"""

from __future__ import annotations

import argparse
import logging
import sys

from seedcast.inference_server.serve_config import add_serve_flags
from seedcast.proto.errors import SeedcastError


def main(argv: list[str] | None = None) -> int:
    """Parse the serve flags and serve until SIGTERM/SIGINT; a user error prints one line and exits 2."""
    parser = argparse.ArgumentParser(
        prog="python -m seedcast.inference_server",
        description="Run a long-lived inference server that perturbs, generates, scores and updates from seeds.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    add_serve_flags(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    from seedcast.inference_server.server import serve_from_args  # grpc and torch load after --help

    try:
        return serve_from_args(args)
    except SeedcastError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
