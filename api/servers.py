"""Inference servers from Python: one in this process (`LocalServer`, for notebooks and tests) or one in a
child process (`start_server_process`, what `fleet.local` does), both from a ServeConfig."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from seedcast.inference_server.serve_config import ServeConfig, write_serve_config
from seedcast.inference_server.server_thread import ServerThread
from seedcast.proto.errors import SeedcastError


class ServerStartError(SeedcastError, RuntimeError):
    """A server process exited, or did not become ready in time; the message holds the end of its log."""


class LocalServer(ServerThread):
    """A Seedcast server in this process, on its own event-loop thread; `address` is where it listens.

        with seedcast.LocalServer(seedcast.ServeConfig(model="smollm2-135m-instruct")) as server:
            seedcast.train(config.model_copy(update={"fleet": FleetConfig(local=0, servers=[server.address])}))

    Unlike `seedcast serve`, it accepts any evaluator spec (it trusts its own process); TLS, tokens and the
    other ServeConfig options apply as they do there.
    """

    def __init__(self, config: ServeConfig) -> None:
        super().__init__(config, allowed_evaluators=None)

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()


def start_server_process(
    config: ServeConfig, log_path: str | Path, timeout_seconds: float = 600
) -> tuple[subprocess.Popen, str]:
    """`seedcast serve --config` in a child process; returns it and its address once it serves.

    The child stops with this process (its parent-pid watchdog) or with `process.terminate()`."""
    folder = Path(tempfile.mkdtemp(prefix="seedcast-server-"))
    ready = folder / "ready.json"
    import os

    config = config.model_copy(update={"ready_file": str(ready), "parent_pid": os.getpid()})
    write_serve_config(config, folder / "serve.yaml")
    command = [sys.executable, "-m", "seedcast.inference_server", "--config", str(folder / "serve.yaml")]
    log_path = Path(log_path)
    with log_path.open("ab") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if ready.exists():
            return process, f"{config.host}:{json.loads(ready.read_text())['port']}"
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise ServerStartError(f"the server exited with code {process.returncode}; end of {log_path}:\n{tail}")
        time.sleep(0.1)
    process.terminate()
    raise ServerStartError(f"the server did not become ready in {timeout_seconds:.0f} s; see {log_path}")
