"""The update log: exact round trip, torn last record discarded, corruption detected."""

from __future__ import annotations

import hashlib
import json

import pytest

from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.run_dir import CorruptRunError, RunDirectory, read_update_log
from seedcast.optimizer.run_records import IterationRecord, RunSummary


def _run(tmp_path):
    return RunDirectory.create(tmp_path / "run", load_config())


def test_round_trip_is_exact(tmp_path):
    run = _run(tmp_path)
    records = [
        ESStep(step=1, sigma=0.002, terms=[(2**62 + 1, 1 / 3), (5, -1e-300)]),
        ESStep(step=2, sigma=0.002, terms=[]),
    ]
    for record in records:
        run.append_update(record)
    assert run.updates() == records


def test_torn_last_record_is_discarded_and_repaired(tmp_path):
    run = _run(tmp_path)
    run.append_update(ESStep(step=1, sigma=0.01, terms=[(1, 0.5)]))
    run.append_update(ESStep(step=2, sigma=0.01, terms=[(2, 0.25)]))
    whole = run.updates_path.read_bytes()
    run.updates_path.write_bytes(whole[:-7])  # a crash in the middle of the second write
    assert [r.step for r in run.updates()] == [1]
    assert [r.step for r in run.updates(repair=True)] == [1]
    run.append_update(ESStep(step=2, sigma=0.01, terms=[(3, 0.1)]))
    assert [r.terms for r in read_update_log(run.updates_path)] == [[(1, 0.5)], [(3, 0.1)]]


def test_corrupt_middle_record_is_an_error(tmp_path):
    run = _run(tmp_path)
    for step in (1, 2, 3):
        run.append_update(ESStep(step=step, sigma=0.01, terms=[(step, 0.5)]))
    lines = run.updates_path.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace("0.5", "0.6")  # checksum no longer matches
    run.updates_path.write_text("".join(lines))
    with pytest.raises(CorruptRunError, match=":2: corrupt update record"):
        run.updates()


def test_out_of_order_steps_are_detected(tmp_path):
    run = _run(tmp_path)
    run.append_update(ESStep(step=1, sigma=0.01, terms=[]))
    run.append_update(ESStep(step=3, sigma=0.01, terms=[]))
    run.append_update(ESStep(step=4, sigma=0.01, terms=[]))
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


def test_a_rule_step_round_trips_and_a_plain_step_keeps_the_three_keys_old_logs_have(tmp_path):
    run = _run(tmp_path)
    plain = ESStep(step=1, sigma=0.01, terms=[(1, 0.5)])
    momentum = ESStep(step=2, sigma=0.01, terms=[(2, 0.25)], rule="momentum", params={"momentum": 0.9})
    run.append_update(plain)
    run.append_update(momentum)
    assert run.updates() == [plain, momentum]
    first, second = (json.loads(line) for line in run.updates_path.read_text().splitlines())
    assert set(first) == {"step", "sigma", "terms", "checksum"}
    assert second["rule"] == "momentum" and second["params"] == {"momentum": 0.9}


def test_a_log_line_from_before_rules_had_names_reads_as_the_momentum_rule(tmp_path):
    body = {"step": 1, "sigma": 0.01, "terms": [[3, 0.5]], "momentum": 0.8}  # how momentum steps were logged
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    checksum = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    path = tmp_path / "updates.jsonl"
    path.write_text(json.dumps({**body, "checksum": checksum}) + "\n")
    (step,) = read_update_log(path)
    assert (step.rule, step.params, step.terms) == ("momentum", {"momentum": 0.8}, [(3, 0.5)])
    assert step.to_request().rule == "momentum" and dict(step.to_request().params) == {"momentum": 0.8}


def test_a_low_rank_step_logs_and_sends_its_rank_and_a_full_rank_step_carries_none(tmp_path):
    run = _run(tmp_path)
    full = ESStep(step=1, sigma=0.01, terms=[(1, 0.5)])
    low = ESStep(step=2, sigma=0.01, terms=[(2, 0.25)], rank=4)
    run.append_update(full)
    run.append_update(low)
    assert run.updates() == [full, low]
    first, second = (json.loads(line) for line in run.updates_path.read_text().splitlines())
    assert "rank" not in first and second["rank"] == 4
    assert full.to_request().rank == 0 and low.to_request().rank == 4
