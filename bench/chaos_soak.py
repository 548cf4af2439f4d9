"""Chaos soak: train through a seeded storm of faults and prove that nothing was lost (prints a report, writes JSON).

A fleet of `seedcast serve` processes trains on a tiny random model (built here, nothing downloaded) while
a seeded schedule injects faults: SIGKILL and restart of a server, SIGSTOP then SIGCONT of a server, a
server added to and removed from `fleet.servers_file`, SIGKILL of the optimizer followed by `--resume`,
and a torn last line in the update log (a write cut short) before a resume. The update log and the final
fingerprint must equal those of a fault-free run on one local server, byte for byte.

    python bench/chaos_soak.py --iterations 50 --faults 100 --json soak.json   # a few minutes on 2 cores

tests/optimizer/test_chaos_soak.py runs it (slow marker).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FAULTS = ("kill_server", "stop_server", "add_server", "remove_server", "kill_optimizer", "tear_log")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """One `seedcast serve` process on a fixed port."""

    def __init__(self, model: str, workdir: Path, name: str) -> None:
        self.model, self.workdir, self.name = model, workdir, name
        self.address = f"127.0.0.1:{_free_port()}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        port = self.address.rsplit(":", 1)[1]
        log = (self.workdir / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "seedcast.inference_server",
                "--model",
                self.model,
                "--port",
                port,
                "--threads",
                "1",
                "--dtype",
                "bfloat16",
                "--allow-evaluator",
                "tests.",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            os.kill(self.process.pid, signum)

    def stop(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()


def overrides(model: str, iterations: int) -> list[str]:
    """The run: small, sampled at T = 1 (so reassigned members must reproduce their samples exactly)."""
    return [
        f"model.name={model}",
        "model.dtype=bfloat16",
        f"iterations={iterations}",
        "batch_size=2",
        "eval_every=0",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size=50",
        "sampling.max_new_tokens=8",
        "sampling.temperature=1.0",
        "es.population=8",
        "es.sigma=0.05",
        "es.learning_rate=0.01",
        "fleet.threads_per_server=1",
    ]


def _logged_steps(run_dir: Path) -> int:
    path = run_dir / "updates.jsonl"
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def members_reassigned(run_dir: Path) -> int:
    """Members handed to another server, summed over the run's iterations (metrics.jsonl)."""
    return sum(
        json.loads(line).get("members_reassigned", 0)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if line.strip()
    )


def seedcast(*args: str, log: Path, wait: bool = True) -> subprocess.Popen:
    handle = log.open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "seedcast.cli", *args], stdout=handle, stderr=subprocess.STDOUT, cwd=REPO_ROOT
    )
    if wait:
        process.wait()
    return process


def soak(model: str, workdir: Path, iterations: int, faults: int, seed: int) -> dict:
    """Run the reference and the chaos run; returns the report."""
    started = time.perf_counter()
    reference = workdir / "reference"
    seedcast(
        "train",
        "--no-progress",
        "--run-dir",
        str(reference),
        *overrides(model, iterations),
        "fleet.local=1",
        log=workdir / "reference.log",
    )
    reference_seconds = time.perf_counter() - started
    rng = random.Random(seed)
    servers = [Server(model, workdir, f"server-{i}") for i in range(4)]
    for server in servers[:3]:
        server.start()
    listed = workdir / "servers.txt"
    listed.write_text("".join(f"{s.address}\n" for s in servers[:3]))
    run_dir = workdir / "chaos"
    fleet = [
        "fleet.local=0",
        f"fleet.servers_file={listed}",
        "fleet.member_deadline_seconds=3",
        "fleet.rejoin_timeout_seconds=1",
        "fleet.connect_timeout_seconds=60",
    ]
    first = ["train", "--no-progress", "--run-dir", str(run_dir), *overrides(model, iterations), *fleet]
    resume = ["train", "--no-progress", "--resume", str(run_dir)]
    counts = dict.fromkeys(FAULTS, 0)
    optimizer = seedcast(*first, log=workdir / "optimizer.log", wait=False)
    chaos_started = time.perf_counter()
    injected, last_kill_step = 0, -2
    while True:
        time.sleep(rng.uniform(0.05, 0.4))
        done = optimizer.poll() is not None
        if done and optimizer.returncode != 0:  # killed before it wrote the run's config: start it afresh
            optimizer = seedcast(
                *(resume if (run_dir / "config.yaml").is_file() else first), log=workdir / "optimizer.log", wait=False
            )
            continue
        if done:
            break
        # Faults are spread over the first 70% of the run (so all of them land before it ends), and the optimizer
        # is killed only after the log has grown since its last kill, so the run always makes progress.
        steps = _logged_steps(run_dir)
        if injected >= min(faults, math.ceil((steps + 1) * faults / max(1, 0.7 * iterations))):
            continue
        kinds = FAULTS if steps >= last_kill_step + 2 else FAULTS[:4]
        fault = rng.choice(kinds)
        if fault == "kill_server":
            victim = rng.choice(servers[:3])
            victim.signal(signal.SIGKILL)
            victim.process.wait()
            victim.start()  # same port: the optimizer readmits it after a Sync
        elif fault == "stop_server":
            victim = rng.choice(servers[:3])
            victim.signal(signal.SIGSTOP)
            time.sleep(rng.uniform(0.1, 1.0))
            victim.signal(signal.SIGCONT)
        elif fault == "add_server":
            if not servers[3].alive():
                servers[3].start()
            listed.write_text("".join(f"{s.address}\n" for s in servers))
        elif fault == "remove_server":
            listed.write_text("".join(f"{s.address}\n" for s in servers[:3]))
            servers[3].stop()
        else:  # kill the optimizer; maybe tear the last line of its log, as a write cut short would
            optimizer.kill()
            optimizer.wait()
            last_kill_step = steps
            if fault == "tear_log":
                with (run_dir / "updates.jsonl").open("ab") as log:
                    log.write(b'{"step": 99999, "sigma": 0.05, "ter')
            if not (run_dir / "config.yaml").is_file():  # killed before the run existed
                subprocess.run(["rm", "-rf", str(run_dir)], check=True)
            optimizer = seedcast(
                *(resume if (run_dir / "config.yaml").is_file() else first), log=workdir / "optimizer.log", wait=False
            )
        counts[fault] += 1
        injected += 1
    chaos_seconds = time.perf_counter() - chaos_started
    for server in servers:
        server.stop()
    same_log = (run_dir / "updates.jsonl").read_bytes() == (reference / "updates.jsonl").read_bytes()
    fingerprints = [
        json.loads(p.read_text())["fingerprint"] for p in (reference / "summary.json", run_dir / "summary.json")
    ]
    reassigned = members_reassigned(run_dir)
    return {
        "iterations": iterations,
        "faults": injected,
        "by_kind": counts,
        "members_reassigned": reassigned,
        "reference_seconds": reference_seconds,
        "chaos_seconds": chaos_seconds,
        "update_log_identical": same_log,
        "fingerprint": fingerprints[1],
        "fingerprint_identical": fingerprints[0] == fingerprints[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder (default: a tiny random Llama built here)")
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--faults", type=int, default=100, help="faults to inject (at least; default: 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedule")
    parser.add_argument("--workdir", default=None, help="where runs and logs go (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="also write the report here")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="seedcast-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        sys.path.insert(0, str(REPO_ROOT))
        from tests.tiny_model import build_tiny_model

        model = str(build_tiny_model(workdir / "tiny-model"))
    report = soak(model, workdir, args.iterations, args.faults, args.seed)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(0 if report["update_log_identical"] and report["fingerprint_identical"] else 1)


if __name__ == "__main__":
    main()
