"""Start inference servers on this machine as child processes (`seedcast train --local N`).

Each child runs `seedcast serve --config RUN_DIR/logs/server-I.yaml`, a ServeConfig with port 0 and
a ready file F; it writes F (its bound port) once the model is loaded and the port accepts calls.
Logs go to RUN_DIR/logs/server-I.log. Children are stopped with SIGTERM (graceful) and killed if
they linger.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from seedcast.inference_server.serve_config import ServeConfig, write_serve_config
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.fleet.client import ClientSecurity
from seedcast.optimizer.fleet.serve_options import refuse_in_process_evaluator, run_serve_config
from seedcast.proto.errors import SeedcastError

log = logging.getLogger("seedcast.fleet")


class LocalServerError(SeedcastError, RuntimeError):
    """A local server failed to start; the message holds the end of its log."""


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def visible_gpu_count() -> int:
    """GPUs this process can see (0 without CUDA): what fleet.local_devices=auto spreads the servers over."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpu_groups(devices: list[str], size: int) -> list[list[str]]:
    """`devices` (cuda:N entries) cut into consecutive groups of `size` GPU numbers, one group per server; an
    incomplete last group is left out. A LocalServerError when not even one group is complete or an entry names
    no GPU number."""
    numbers = [device.removeprefix("cuda:") for device in devices]
    if not all(number.isdigit() for number in numbers) or len(numbers) < size:
        raise LocalServerError(
            f"each local server spans {size} GPUs (model.tensor_parallel_size × model.pipeline_parallel_size), so "
            f"fleet.local_devices must list at least {size} GPUs as cuda:N (auto: the visible ones); it gives "
            f"{devices}"
        )
    return [numbers[start : start + size] for start in range(0, len(numbers) - size + 1, size)]


class LocalFleet:
    """N local `seedcast serve` processes for one run."""

    def __init__(self, config: TrainConfig, logs_dir: Path, noise: str | None = None) -> None:
        self.config = config
        self.logs_dir = logs_dir
        self.noise = noise or config.es.noise  # the run's kind; start() gets it once es.noise=auto is resolved
        self.processes: list[subprocess.Popen] = []
        self.addresses: list[str] = []
        self._ready_dir = Path(tempfile.mkdtemp(prefix="seedcast-ready-"))

    def threads_per_server(self) -> int:
        """Torch threads for each server: the configured number, else the cores split evenly."""
        fleet = self.config.fleet
        return fleet.threads_per_server or max(1, (os.cpu_count() or 1) // max(1, fleet.local))

    def cpu_cores(self, index: int) -> str:
        """The cores local vLLM server `index` pins its threads to: its own slice of the machine."""
        threads, cores = self.threads_per_server(), os.cpu_count() or 1
        first = (index * threads) % cores
        return f"{first}-{min(first + threads, cores) - 1}"

    def devices(self) -> list[str] | None:
        """The devices fleet.local_devices names (auto: every visible GPU), None for model.device everywhere."""
        chosen = self.config.fleet.local_devices
        if chosen == "auto":
            return [f"cuda:{index}" for index in range(visible_gpu_count())] or None
        return chosen

    def placement(self, index: int) -> tuple[str, dict[str, str]]:
        """Local server `index`'s device and the environment it needs: its entry of fleet.local_devices (in
        turn); a vllm server on cuda:N is told `cuda` and sees only GPU N through CUDA_VISIBLE_DEVICES, because
        vLLM places its workers on the devices it can see. A server spanning G GPUs (model.tensor_parallel_size ×
        pipeline_parallel_size) takes the list's entries G at a time: server i the i-th group, in turn."""
        devices = self.devices()
        group_size = self.config.model.gpus_per_server
        if group_size > 1 and devices:
            groups = gpu_groups(devices, group_size)
            return "cuda", {"CUDA_VISIBLE_DEVICES": ",".join(groups[index % len(groups)])}
        device = devices[index % len(devices)] if devices else self.config.model.device
        if self.config.model.backend == "vllm" and device.startswith("cuda:"):
            return "cuda", {"CUDA_VISIBLE_DEVICES": device.removeprefix("cuda:")}
        return device, {}

    def serve_config(self, index: int) -> ServeConfig:
        """The options of local server `index`: the run's (serve_options.py) on loopback, a free port, its device
        and its share of the cores, with a ready file and this process as the parent it stops with."""
        fleet = self.config.fleet
        device, _ = self.placement(index)
        vllm_on_cpu = self.config.model.backend == "vllm" and device in ("auto", "cpu")
        return run_serve_config(
            self.config,
            self.noise,
            host="127.0.0.1",
            port=0,
            device=device,
            threads=self.threads_per_server(),
            cpu_cores=self.cpu_cores(index) if vllm_on_cpu else None,
            ready_file=str(self._ready_dir / f"server-{index}.json"),
            token_file=fleet.token_file,
            metrics_port=None if fleet.local_metrics_port is None else fleet.local_metrics_port + index,
            parent_pid=os.getpid(),  # they shut down if this optimizer dies, even by SIGKILL
        )

    def start(self, noise: str | None = None) -> list[str]:
        """Launch the servers, drawing `noise` (the run's kind, once the fleet has chosen it; default: es.noise),
        and wait until all are ready; returns their addresses."""
        self.noise = noise or self.noise
        refuse_in_process_evaluator(self.config, "child processes")
        for index in range(self.config.fleet.local):
            config_path = self.logs_dir / f"server-{index}.yaml"
            write_serve_config(self.serve_config(index), config_path)
            command = [sys.executable, "-m", "seedcast.inference_server", "--config", str(config_path)]
            log_path = self.logs_dir / f"server-{index}.log"
            with log_path.open("ab") as log_file:
                environment = {**os.environ, **self.placement(index)[1]}
                self.processes.append(
                    subprocess.Popen(
                        command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment
                    )
                )
        deadline = time.monotonic() + self.config.fleet.start_timeout_seconds
        for index, process in enumerate(self.processes):
            self.addresses.append(self._wait_ready(index, process, deadline))
        log.info("started %d local server(s): %s", len(self.addresses), ", ".join(self.addresses))
        return self.addresses

    def current_addresses(self) -> list[str]:
        """The servers' addresses: fixed, since the optimizer never restarts a local server."""
        return list(self.addresses)

    def client_security(self, remote: ClientSecurity) -> ClientSecurity:
        """Local servers listen on loopback in plaintext; they still check the token."""
        return remote.plaintext()

    def _wait_ready(self, index: int, process: subprocess.Popen, deadline: float) -> str:
        ready = self._ready_dir / f"server-{index}.json"
        log_path = self.logs_dir / f"server-{index}.log"
        while time.monotonic() < deadline:
            if ready.exists():
                return f"127.0.0.1:{json.loads(ready.read_text())['port']}"
            if process.poll() is not None:
                self.stop()
                raise LocalServerError(
                    f"local server {index} exited with code {process.returncode} while "
                    f"loading; end of {log_path}:\n{_tail(log_path)}"
                )
            time.sleep(0.2)
        self.stop()
        raise LocalServerError(
            f"local server {index} did not become ready within "
            f"{self.config.fleet.start_timeout_seconds:g} s; see {log_path}"
        )

    def peak_rss_bytes(self) -> list[int]:
        """Peak resident memory (VmHWM) of each running local server; empty where /proc is unavailable."""
        peaks = []
        for process in self.processes:
            try:
                status = Path(f"/proc/{process.pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peaks.append(int(line.split()[1]) * 1024)
        return peaks

    def stop(self, grace_seconds: float = 10.0) -> None:
        """SIGTERM every server, then SIGKILL what is still running after the grace period."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + grace_seconds
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        shutil.rmtree(self._ready_dir, ignore_errors=True)
