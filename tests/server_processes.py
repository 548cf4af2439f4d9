"""Real `seedcast serve` processes on fixed loopback ports, for fault-injection tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.prometheus_server import free_port


class ServerProcess:
    """One server process on a fixed port; it can be killed, stopped, resumed and restarted."""

    def __init__(self, model_dir: str, workdir: Path, name: str, extra_args: tuple[str, ...] = ()) -> None:
        self.model_dir = model_dir
        self.workdir = workdir
        self.name = name
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None
        self.starts = 0

    def start(self, wait: bool = True) -> ServerProcess:
        """Launch (again, on the same port); with `wait`, return once it serves."""
        ready = self.workdir / f"{self.name}-{self.starts}.ready"
        self.starts += 1
        log = (self.workdir / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "seedcast.inference_server",
                "--model",
                self.model_dir,
                "--port",
                str(self.port),
                "--threads",
                "1",
                "--dtype",
                "bfloat16",
                "--ready-file",
                str(ready),
                "--allow-evaluator",
                "tests.",
                *self.extra_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        if wait:
            deadline = time.monotonic() + 120
            while not ready.exists():
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server {self.name} did not start; see {self.workdir / self.name}.log")
                time.sleep(0.1)
            assert json.loads(ready.read_text())["port"] == self.port
        return self

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def pause(self) -> None:
        """SIGSTOP: the process holds its socket but answers nothing."""
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT."""
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Resume if paused, then terminate."""
        if self.process and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
