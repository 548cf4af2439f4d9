"""The examples run as written (on the tiny model, with small budgets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples.format_and_correctness import reward

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("reply", "score"),
    [("12 + 30 = 42", 1.0), ("The answer is 41.", 0.5), ("Let me think about", 0.0), ("42 is it", 0.0)],
)
def test_the_custom_evaluator_scores_format_and_correctness(reply, score):
    assert reward(reply, "42") == score


def test_the_custom_evaluator_cannot_score_a_reference_that_is_not_a_number():
    assert reward("42", "forty-two") is None


def test_train_export_load_runs_as_written(tmp_path, tiny_model_dir):
    command = [sys.executable, "-m", "examples.train_export_load", "--model", tiny_model_dir]
    command += ["--iterations", "2", "--population", "4", "--max-new-tokens", "6", "--out", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trained 2 iterations" in done.stdout
    assert "weights match the servers': True" in done.stdout
    assert "transformers:" in done.stdout and (tmp_path / "model" / "README.md").is_file()


def test_remote_reward_runs_as_written(tmp_path, tiny_model_dir):
    command = [sys.executable, "-m", "examples.remote_reward", "--model", tiny_model_dir, "--iterations", "2"]
    done = subprocess.run([*command, "--out", str(tmp_path / "run")], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "scored remotely at http://127.0.0.1:" in done.stdout and "per iteration [" in done.stdout
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["members_ok"] for r in rows] == [4, 4]  # every member was scored by the service


def test_reward_model_runs_as_written(tmp_path, tiny_model_dir):
    from tests.tiny_model import build_tiny_reward_model

    build_tiny_reward_model(tmp_path / "rm", tiny_model_dir)  # a tiny random classifier
    command = [sys.executable, "-m", "examples.reward_model", "--reward-model", str(tmp_path / "rm")]
    command += ["--model", tiny_model_dir, "--iterations", "2", "--out", str(tmp_path / "run")]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["members_ok"] for r in rows] == [4, 4]
    assert all(0.0 < r["reward_mean"] < 1.0 for r in rows)  # a classifier's graded scores, not 0/1


def test_two_machine_fleet_runs_as_written(tmp_path, tiny_model_dir):
    out = tmp_path / "fleet"
    settings = {"MODEL": tiny_model_dir, "ITERATIONS": "2", "POPULATION": "4", "OUT": str(out)}
    settings["SEEDCAST"] = str(Path(sys.executable).parent / "seedcast")
    script = REPO_ROOT / "examples" / "two_machine_fleet.sh"
    done = subprocess.run(
        ["bash", str(script)],
        cwd=REPO_ROOT,
        env={**os.environ, **settings},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["servers_active"], r["members_ok"]) for r in rows] == [(2, 4), (2, 4)]
    token = (out / "pki" / "token").read_text().strip()
    for box in ("box1", "box2"):
        log = (out / f"{box}.log").read_text()
        assert "(TLS, bearer token required)" in log and "applied step 2" in log
        assert token not in log
