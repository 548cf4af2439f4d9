"""bench/es_vs_grpo_files.py: what the bench keeps of its runs and evaluations between sessions, and what it
leaves out (weights; samples too large to commit)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo_files  # noqa: E402


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_published_runs_and_evaluations_come_back_into_a_fresh_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "t" / "hybrid@0"
    for name in (
        "plan-command.json",
        "config.yaml",
        "summary.json",
        "trl_log.jsonl",
        "init-model/seedcast_export.json",
    ):
        _write(run / name, name)
    _write(run / "model" / "model.safetensors", "weights")
    es_vs_grpo_files.publish_run(run, "t", "hybrid@0")
    evals = tmp_path / "runs" / "t" / "compare" / "evals" / "hybrid@0"
    for name in ("results.json", "samples.jsonl", "entry.json", "geometry.json", "pass_at_k.png"):
        _write(evals / name, name)
    es_vs_grpo_files.publish_evals(evals.parent.parent, "t", ["hybrid@0"])
    published = tmp_path / "docs" / "results" / "es-vs-grpo" / "t"
    assert not (published / "hybrid@0" / "model").exists()  # never weights
    assert (
        published / "hybrid@0" / "init-model" / "seedcast_export.json"
    ).read_text() == "init-model/seedcast_export.json"
    assert not (published / "compare" / "evals" / "hybrid@0" / "pass_at_k.png").exists()

    fresh = tmp_path / "fresh"
    restored = es_vs_grpo_files.restore(fresh, "t")
    assert restored == ["hybrid@0", "compare/evals/hybrid@0"]
    assert (fresh / "hybrid@0" / "summary.json").read_text() == "summary.json"
    assert (fresh / "compare" / "evals" / "hybrid@0" / "geometry.json").read_text() == "geometry.json"
    # What is already there (it may hold weights, or newer evaluations) is left alone.
    _write(fresh / "compare" / "evals" / "hybrid@0" / "results.json", "newer")
    assert es_vs_grpo_files.restore(fresh, "t") == []
    assert (fresh / "compare" / "evals" / "hybrid@0" / "results.json").read_text() == "newer"


def test_samples_too_large_to_commit_are_left_out_and_their_results_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(es_vs_grpo_files, "PUBLISHED_SAMPLES_LIMIT", 8)
    evals = tmp_path / "runs" / "t" / "compare-256" / "evals"
    _write(evals / "small" / "samples.jsonl", "8 bytes!")
    _write(evals / "large" / "samples.jsonl", "9 bytes!!")
    for label in ("small", "large"):
        _write(evals / label / "results.json", "{}")
    published = es_vs_grpo_files.publish_evals(evals.parent, "t") / "evals"
    assert (published / "small" / "samples.jsonl").is_file()
    assert not (published / "large" / "samples.jsonl").exists()
    assert (published / "large" / "results.json").is_file()
