"""A real Ray cluster on this machine for tests and benches: a head and further nodes, each `ray start --block` on
loopback with its own CPUs, stopped by its own PID (a blocking `ray start` ends the Ray processes it started when
it gets SIGTERM), never by `ray stop`, which would stop every Ray on the machine."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalRayCluster:
    """`nodes` Ray nodes of `cpus_per_node` CPUs each (the first is the head); `address` is what ray.init takes."""

    def __init__(self, nodes: int = 2, cpus_per_node: int = 2, start_timeout_seconds: float = 120) -> None:
        self.nodes, self.cpus_per_node, self.timeout = nodes, cpus_per_node, start_timeout_seconds
        # Short: Ray's socket paths live under it and a Unix socket path has at most 107 bytes.
        self.folder = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        self.address = f"127.0.0.1:{free_port()}"
        self.processes: list[subprocess.Popen] = []

    def _ray_start(self, name: str, *flags: str) -> None:
        log = (self.folder / f"{name}.log").open("ab")
        common = ["--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus_per_node}", "--num-gpus=0"]
        self.processes.append(
            subprocess.Popen(
                [RAY, "start", *common, "--disable-usage-stats", *flags],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
                start_new_session=True,
            )
        )

    def start(self) -> LocalRayCluster:
        """Start the head, then the other nodes, and wait until the cluster has them all."""
        port = self.address.rsplit(":", 1)[1]
        self._ray_start(
            "head",
            "--head",
            f"--port={port}",
            f"--temp-dir={self.folder}",
            "--include-dashboard=false",
            f"--ray-client-server-port={free_port()}",
        )
        self._wait_for_nodes(1)
        for index in range(1, self.nodes):
            self._ray_start(f"node-{index}", f"--address={self.address}")
        self._wait_for_nodes(self.nodes)
        return self

    def _wait_for_nodes(self, count: int) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in self.processes):
                break
            status = subprocess.run(
                [RAY, "status", f"--address={self.address}"], capture_output=True, text=True, timeout=60
            )
            if status.returncode == 0 and status.stdout.count("node_") >= count:
                return
            time.sleep(1)
        logs = "\n".join(path.read_text(errors="replace")[-1500:] for path in sorted(self.folder.glob("*.log")))
        self.stop()
        raise RuntimeError(f"the local Ray cluster did not reach {count} node(s):\n{logs}")

    def stop(self) -> None:
        """SIGTERM each `ray start --block` (the nodes first), then SIGKILL its process group if it lingers."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
