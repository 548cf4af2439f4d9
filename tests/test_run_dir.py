"""The update log: exact round trip, torn last record discarded, corruption detected."""

from __future__ import annotations

import json

import pytest

from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import CorruptRunError, RunDirectory, UpdateRecord, read_update_log
from seedcast.optimizer.run_records import IterationRecord, RunSummary


def _run(tmp_path):
    return RunDirectory.create(tmp_path / "run", load_config())


def test_round_trip_is_exact(tmp_path):
    run = _run(tmp_path)
    records = [UpdateRecord(1, 0.002, [(2**62 + 1, 1 / 3), (5, -1e-300)]), UpdateRecord(2, 0.002, [])]
    for record in records:
        run.append_update(record)
    assert run.updates() == records


def test_torn_last_record_is_discarded_and_repaired(tmp_path):
    run = _run(tmp_path)
    run.append_update(UpdateRecord(1, 0.01, [(1, 0.5)]))
    run.append_update(UpdateRecord(2, 0.01, [(2, 0.25)]))
    whole = run.updates_path.read_bytes()
    run.updates_path.write_bytes(whole[:-7])  # a crash in the middle of the second write
    assert [r.step for r in run.updates()] == [1]
    assert [r.step for r in run.updates(repair=True)] == [1]
    run.append_update(UpdateRecord(2, 0.01, [(3, 0.1)]))
    assert [r.terms for r in read_update_log(run.updates_path)] == [[(1, 0.5)], [(3, 0.1)]]


def test_corrupt_middle_record_is_an_error(tmp_path):
    run = _run(tmp_path)
    for step in (1, 2, 3):
        run.append_update(UpdateRecord(step, 0.01, [(step, 0.5)]))
    lines = run.updates_path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("0.5", "0.6")  # checksum no longer matches
    run.updates_path.write_text("".join(lines))
    with pytest.raises(CorruptRunError, match=":2: corrupt update record"):
        run.updates()


def test_out_of_order_steps_are_detected(tmp_path):
    run = _run(tmp_path)
    run.append_update(UpdateRecord(1, 0.01, []))
    run.append_update(UpdateRecord(3, 0.01, []))
    run.append_update(UpdateRecord(4, 0.01, []))
    with pytest.raises(CorruptRunError, match="step 3 where step 2"):
        run.updates()


def test_create_refuses_an_existing_run(tmp_path):
    _run(tmp_path)
    with pytest.raises(FileExistsError, match="--resume"):
        _run(tmp_path)


def test_missing_or_broken_config_snapshot(tmp_path):
    with pytest.raises(CorruptRunError, match="config.yaml is missing"):
        RunDirectory(tmp_path).load_config()
    (tmp_path / "config.yaml").write_text("es: {sigma: [unclosed\n")
    with pytest.raises(CorruptRunError, match="not valid YAML"):
        RunDirectory(tmp_path).load_config()


def test_resume_overrides_apply_on_the_snapshot(tmp_path):
    run = _run(tmp_path)
    config = run.load_config(["iterations=25"])
    assert config.iterations == 25 and config.model.name == "smollm2-135m-instruct"


def test_iteration_records_round_trip_and_leave_out_what_was_not_measured(tmp_path):
    run = RunDirectory.create(tmp_path / "run", load_config())
    es = IterationRecord(
        iteration=0,
        step=1,
        seconds=2.5,
        reward_mean=0.5,
        members_ok=4,
        fingerprint="ab",
        phase_seconds={"perturb": 0.1, "generate": 2.0, "score": 0.01, "restore": None},
    )
    grpo = IterationRecord(iteration=1, step=2, completions=64, peak_rss_bytes=2**30, eval_reward=0.25)
    run.append_metrics(es)
    run.append_metrics(grpo)
    assert run.metrics() == [es, grpo]
    row = json.loads(run.metrics_path.read_text().splitlines()[1])
    assert row == {"iteration": 1, "step": 2, "completions": 64, "peak_rss_bytes": 2**30, "eval_reward": 0.25}
    run.truncate_metrics(1)
    assert run.metrics() == [es]


def test_summaries_written_before_the_peak_had_one_name_still_read(tmp_path):
    run = RunDirectory.create(tmp_path / "run", load_config())
    (run.path / "summary.json").write_text(
        json.dumps(
            {"method": "es", "steps": 3, "wall_seconds": 9.0, "completion_tokens": 12, "server_peak_rss_bytes": 5}
        )
    )
    summary = run.summary()
    assert (summary.peak_rss_bytes, summary.peak_memory_of) == (5, "one ES inference server")
    run.write_summary(RunSummary(method="grpo", steps=1, wall_seconds=1.0, completion_tokens=2, peak_rss_bytes=7))
    assert run.summary().peak_rss_bytes == 7 and run.summary().peak_memory_of == "the GRPO training process"
