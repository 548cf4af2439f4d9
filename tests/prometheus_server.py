"""Run a real Prometheus (Debian's `prometheus` package) for tests, on a free loopback port."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest


def prometheus_binary() -> str:
    """The prometheus binary; a skip outside CI, a failure in CI (where .ci/run installs it)."""
    binary = shutil.which("prometheus")
    if binary is None:
        message = "prometheus is not installed: apt-get install prometheus (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return binary


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PrometheusServer:
    """A prometheus process with its own config and storage under `workdir`."""

    def __init__(self, config: Path, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    prometheus_binary(),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1)
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    def api(self, path: str, **params: str) -> dict:
        """GET /api/v1/PATH; returns the decoded JSON even for 4xx answers (they carry the error)."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            return json.loads(error.read())

    def wait_for_targets(self, count: int, timeout: float = 30.0) -> None:
        """Wait until `count` targets are up (service discovery applies new targets after ~5 s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            targets = self.api("targets")["data"]["activeTargets"]
            if len(targets) >= count and all(t["health"] == "up" for t in targets):
                return
            time.sleep(0.5)
        raise RuntimeError(f"prometheus did not scrape {count} healthy targets in {timeout:g} s")

    def query(self, expr: str) -> dict:
        """An instant query."""
        return self.api("query", query=expr)

    def stop(self) -> None:
        """Terminate the process."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
