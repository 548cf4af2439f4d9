"""Chaos on the Ray launcher: kill server actors mid-run and prove that nothing was lost (prints a report, writes JSON).

A run with `fleet.launcher=ray` trains a tiny random model (built here, nothing downloaded) on a real Ray cluster
of two nodes started on this machine (`ray start` on loopback; or --ray-address for one you run). While it trains,
the bench SIGKILLs the process of one server actor at a time, spread over the run, each once the last one's
restart has rejoined: Ray restarts the actor (a fresh server on a new port), the fleet hands the dead server's
members to the other, forgets its address and readmits the restarted one by Sync. The update log and final
fingerprint must equal those of an undisturbed run on the same cluster, byte for byte.

    python bench/ray_chaos.py --iterations 30 --kills 3 --json ray-chaos.json   # about two minutes on 2 cores

tests/optimizer/fleet/test_ray_launcher.py runs it (slow marker); docs/reliability.md reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.chaos_soak import _logged_steps, members_reassigned, seedcast  # noqa: E402  (the process soak's helpers)


def run_overrides(model: str, iterations: int, ray_address: str) -> list[str]:
    """The run: two server actors, sampled at T = 1 (so a reassigned member must reproduce its samples exactly),
    slow enough per iteration (about a second here) that a kill lands mid-iteration and a restart rejoins."""
    return [
        f"model.name={model}",
        "model.dtype=bfloat16",
        f"iterations={iterations}",
        "batch_size=4",
        "eval_every=0",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size=50",
        "sampling.max_new_tokens=32",
        "sampling.temperature=1.0",
        "es.population=16",
        "es.sigma=0.05",
        "es.learning_rate=0.01",
        "fleet.local=2",
        "fleet.launcher=ray",
        f"fleet.ray.address={ray_address}",
        "fleet.ray.host=127.0.0.1",
        "fleet.ray.max_restarts=-1",
        "fleet.threads_per_server=1",
        "fleet.member_deadline_seconds=10",
        "fleet.rejoin_timeout_seconds=1",
    ]


def server_actor_pids() -> list[int]:
    """The processes of this machine's Seedcast server actors (Ray titles them `ray::ServerActor...`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::ServerActor"):
            found.append(int(entry.name))
    return sorted(found)


def _count(log: Path, text: str) -> int:
    return log.read_text(errors="replace").count(text) if log.is_file() else 0


def chaos(model: str, workdir: Path, iterations: int, kills: int, ray_address: str) -> dict:
    """The undisturbed run, then the run with `kills` actor kills; returns the report."""
    started = time.perf_counter()
    reference = workdir / "reference"
    arguments = run_overrides(model, iterations, ray_address)
    finished = seedcast("train", "--no-progress", "--run-dir", str(reference), *arguments, log=workdir / "ref.log")
    if finished.returncode != 0:
        raise SystemExit(f"the undisturbed run failed; see {workdir / 'ref.log'}")
    reference_seconds = time.perf_counter() - started
    run_dir, log = workdir / "chaos", workdir / "chaos.log"
    optimizer = seedcast("train", "--no-progress", "--run-dir", str(run_dir), *arguments, log=log, wait=False)
    chaos_started, killed = time.perf_counter(), []
    while optimizer.poll() is None:
        time.sleep(0.2)
        due = len(killed) < kills and _logged_steps(run_dir) >= (len(killed) + 1) * iterations // (kills + 2)
        if due and _count(log, "rejoined at step") >= len(killed):  # the last victim is back
            victims = server_actor_pids()
            if len(victims) == 2:
                victim = victims[len(killed) % 2]
                os.kill(victim, signal.SIGKILL)
                killed.append({"pid": victim, "step": _logged_steps(run_dir)})
    chaos_seconds = time.perf_counter() - chaos_started
    if optimizer.returncode != 0:
        raise SystemExit(f"the chaos run failed; see {log}")
    summaries = [json.loads((path / "summary.json").read_text()) for path in (reference, run_dir)]
    reassigned = members_reassigned(run_dir)
    return {
        "iterations": iterations,
        "kills": len(killed),
        "killed": killed,
        "restarts_found": _count(log, "Ray restarted server actor"),
        "rejoins": _count(log, "rejoined at step"),
        "members_reassigned": reassigned,
        "reference_seconds": round(reference_seconds, 1),
        "chaos_seconds": round(chaos_seconds, 1),
        "update_log_identical": (run_dir / "updates.jsonl").read_bytes() == (reference / "updates.jsonl").read_bytes(),
        "fingerprint": summaries[1]["fingerprint"],
        "fingerprint_identical": summaries[0]["fingerprint"] == summaries[1]["fingerprint"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="model folder (default: a tiny random Llama built here)")
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--kills", type=int, default=3, help="server actors to kill, one at a time (default: 3)")
    parser.add_argument("--ray-address", default=None, help="a running Ray cluster (default: start one here)")
    parser.add_argument("--workdir", default=None, help="where runs and logs go (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="also write the report here")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="seedcast-ray-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    from tests.ray_cluster import LocalRayCluster
    from tests.tiny_model import build_tiny_model

    model = args.model or str(build_tiny_model(workdir / "tiny-model"))
    cluster = None if args.ray_address else LocalRayCluster(nodes=2, cpus_per_node=2).start()
    try:
        report = chaos(model, workdir, args.iterations, args.kills, args.ray_address or cluster.address)
    finally:
        if cluster is not None:
            cluster.stop()
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    identical = report["update_log_identical"] and report["fingerprint_identical"]
    sys.exit(0 if identical and report["kills"] == args.kills else 1)


if __name__ == "__main__":
    main()
