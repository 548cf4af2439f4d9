"""A two-server local ES run on the device through real gRPC, then an export on the same device type: the
servers must agree on every step's fingerprint (the trainer refuses to go on otherwise) and the export must
reproduce the last one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from seedcast.optimizer.run_dir import RunDirectory


def _cli(*arguments: str, log: Path) -> None:
    with log.open("ab") as handle:
        command = [sys.executable, "-m", "seedcast.cli", *arguments]
        subprocess.run(command, check=True, stdout=handle, stderr=subprocess.STDOUT)


def two_server_run(model_dir: str, device: str, out: Path, max_new_tokens: int) -> dict:
    """2 iterations, population 4, over 2 local servers on `device` (on a GPU machine placed by
    fleet.local_devices=auto, one per visible GPU in turn); the export is replayed on `device` too."""
    run_dir, exported, log = out / "fleet-run", out / "fleet-run-export", out / "fleet-run.log"
    overrides = {
        "model.name": model_dir,
        "model.device": device,
        "iterations": 2,
        "batch_size": 8,
        "eval_every": 0,
        "task.evaluator": "tests.tiny_model:digit_fraction_reward",  # graded on any text, even a random model's
        "sampling.max_new_tokens": max_new_tokens,
        "es.population": 4,
        "es.sigma": 0.01,
        "es.learning_rate": 1e-3,
        "es.noise": "table",
        "fleet.local": 2,
        "fleet.threads_per_server": 1,
    }
    if device == "cuda":  # one server per visible GPU in turn (fleet.local_devices): what each is told is reported
        overrides["fleet.local_devices"] = "auto"
    for folder in (run_dir, exported):  # a rerun of the check starts afresh
        shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    _cli("train", "--run-dir", str(run_dir), "--no-progress", *(f"{k}={v}" for k, v in overrides.items()), log=log)
    trained = time.perf_counter() - started
    _cli("export", str(run_dir), "--out", str(exported), "--device", device, log=log)
    rows = [r for r in RunDirectory(run_dir).metrics() if r.iteration >= 0]
    export = json.loads((exported / "seedcast_export.json").read_text())
    told = [yaml.safe_load(path.read_text()) for path in sorted((run_dir / "logs").glob("server-*.yaml"))]
    server_devices = [config.get("device") for config in told]
    return {
        "iterations": len(rows),
        "servers_active": [r.servers_active for r in rows],
        "members_ok": [r.members_ok for r in rows],
        "iteration_seconds": [r.seconds for r in rows],
        "fingerprints": [r.fingerprint for r in rows],
        "export_fingerprint": export.get("fingerprint"),
        "export_matches_servers": export.get("matches_servers"),
        "wall_seconds": trained,
        "server_devices": server_devices,
        "ok": len(rows) == 2
        and (device != "cuda" or all(str(told).startswith("cuda:") for told in server_devices))
        and all(r.servers_active == 2 and r.members_ok == 4 for r in rows)
        and export.get("matches_servers") is True,
    }
