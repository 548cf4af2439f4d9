"""The chaos soak (bench/chaos_soak.py): 50 iterations through at least 100 seeded faults (server SIGKILL and
restart, SIGSTOP, servers added and removed through fleet.servers_file, optimizer SIGKILL and --resume, a torn
update log) end on the update log and fingerprint of a fault-free run, byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_nothing_is_lost_through_a_hundred_faults(tmp_path, tiny_model_dir):
    report_path = tmp_path / "soak.json"
    completed = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "chaos_soak.py"),
            "--model",
            tiny_model_dir,
            "--iterations",
            "50",
            "--faults",
            "100",
            "--workdir",
            str(tmp_path / "soak"),
            "--json",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["faults"] >= 100 and all(count > 0 for count in report["by_kind"].values()), report
    assert report["update_log_identical"] and report["fingerprint_identical"]
