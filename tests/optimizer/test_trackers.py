"""report_to: the per-step record in TensorBoard (read back from the event files) and in W&B offline mode."""

from __future__ import annotations

import json
import os

import pytest

from seedcast.cli import main
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_records import IterationRecord
from seedcast.optimizer.trackers import TrackerUnavailableError, check_installed, open_trackers, wandb_mode
from tests.studies.test_grpo import TINY_TASK


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _logged_config(folder) -> dict:
    """The config a TensorBoard run logged as text (a YAML block)."""
    import yaml
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    (event,) = events.Tensors("config/text_summary")
    return yaml.safe_load(event.tensor_proto.string_val[0].decode().strip("`\n"))


def _rows(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("written", "names"),
    [
        ("none", []),
        ("tensorboard", ["tensorboard"]),
        ("tensorboard,wandb", ["tensorboard", "wandb"]),
        ("[wandb]", ["wandb"]),
    ],
)
def test_report_to_reads_as_users_write_it(written, names):
    assert load_config(overrides=[f"report_to={written}"]).report_to == names


def test_an_unknown_tracker_is_a_config_error_naming_the_choices():
    with pytest.raises(ConfigError, match="report_to.0: unknown tracker 'mlflow'; choose one of tensorboard, wandb"):
        load_config(overrides=["report_to=mlflow"])


def test_a_missing_tracker_package_says_what_to_install(monkeypatch, tmp_path, capsys, tiny_model_dir):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(TrackerUnavailableError, match=r"seedcast\[wandb\]"):
        check_installed(["tensorboard", "wandb"])
    command = ["train", "--run-dir", str(tmp_path / "run"), f"model.name={tiny_model_dir}", "report_to=wandb"]
    assert main(command) == 2
    assert "pip install 'seedcast[wandb]'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


def test_es_training_writes_the_metrics_rows_to_tensorboard(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    overrides = [
        f"model.name={tiny_model_dir}",
        "iterations=2",
        "batch_size=3",
        "eval_every=1",
        "eval_size=4",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size=50",
        "sampling.max_new_tokens=6",
        "sampling.temperature=1.0",
        "es.population=4",
        "es.sigma=0.05",
        "fleet.local=1",
        "fleet.threads_per_server=1",
        "report_to=tensorboard",
    ]
    assert main(["train", "--run-dir", str(run), "--no-progress", *overrides]) == 0
    scalars, rows = _scalars(run / "tensorboard"), _rows(run)
    assert scalars["eval/reward"] == [(r["step"], pytest.approx(r["eval_reward"])) for r in rows]
    assert scalars["train/reward"] == [(r["step"], pytest.approx(r["reward_mean"])) for r in rows[1:]]
    lengths = [(r["step"], pytest.approx(r["completion_tokens"] / r["completions"])) for r in rows[1:]]
    assert scalars["train/completions/mean_length"] == lengths
    clipped = [(r["step"], pytest.approx(r["truncated_answers"] / r["completions"])) for r in rows[1:]]
    assert scalars["train/completions/clipped_ratio"] == clipped
    assert [step for step, _ in scalars["perf/member_generate_seconds"]] == [1, 2]
    assert _logged_config(run / "tensorboard")["es"]["noise"] == "table"  # resolved from auto, as config.yaml


def test_grpo_writes_the_same_rows_and_trl_writes_its_own_beside_them(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    run = tmp_path / "grpo"
    command = ["grpo", "--run-dir", str(run), "--no-progress", f"model.name={tiny_model_dir}", *TINY_TASK]
    assert main([*command, "report_to=tensorboard"]) == 0
    scalars, rows = _scalars(run / "tensorboard"), _rows(run)
    assert scalars["train/reward"] == [(r["step"], pytest.approx(r["reward_mean"])) for r in rows[1:]]
    trl = _scalars(run / "tensorboard" / "trl")
    assert {"train/loss", "train/reward", "train/completions/mean_length"} <= set(trl)  # TRL's names are ours
    assert trl["train/reward"] == [(r["step"], pytest.approx(r["reward_mean"], abs=1e-6)) for r in rows[1:]]
    assert "TENSORBOARD_LOGGING_DIR" not in os.environ  # pointed there for this run only


def test_wandb_logs_offline_without_an_account(tmp_path, monkeypatch):
    import wandb

    for variable in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / variable.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    assert wandb_mode() == "offline"
    run = tmp_path / "run"
    trackers = open_trackers(["wandb"], run, {"es": {"sigma": 0.005}}, project="my-project", run_name="my-run")
    trackers.log_record(IterationRecord(iteration=-1, step=0, eval_reward=0.25))
    trackers.log_record(IterationRecord(iteration=0, step=1, reward_mean=0.123456789, fingerprint="abc"))
    trackers.close()
    # wandb-core may still be writing its transaction log when finish() returns (CI once read only the
    # 7-byte header); shutting the service down, as a process exit does, waits for the write.
    wandb.teardown()
    (log_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    written = log_file.read_bytes()
    for expected in (b"train/reward", b"0.123456789", b"eval/reward", b"sigma", b"my-project", b"my-run"):
        assert expected in written, expected


def test_eval_reports_its_numbers_to_tensorboard(tmp_path, tiny_model_dir):
    out = tmp_path / "eval"
    command = ["eval", "--model", tiny_model_dir, "--limit", "3", "--n", "2", "--k", "1,2", "--max-tokens", "4"]
    overrides = ["task.evaluator=tests.tiny_model:contains_digit_reward", "fleet.threads_per_server=1"]
    assert main([*command, "--out", str(out), *overrides, "report_to=tensorboard"]) == 0
    results = json.loads((out / "results.json").read_text())
    scalars = _scalars(out / "tensorboard")
    assert scalars["eval/pass@2"] == [(0, pytest.approx(results["pass_at_k"]["2"]["mean"]))]
    assert scalars["eval/truncation_rate"] == [(0, pytest.approx(results["truncation_rate"]))]


def test_every_metrics_field_has_a_tracker_name_and_none_collide():
    from dataclasses import fields

    from seedcast.optimizer.tracked_scalars import TRACKED_NAMES, UNTRACKED, tracked_scalars
    from seedcast.proto.telemetry import MEMBER_PHASES, phase_field

    row_keys = {f.name for f in fields(IterationRecord)} - {"phase_seconds"} | {phase_field(p) for p in MEMBER_PHASES}
    assert row_keys - set(UNTRACKED) == set(TRACKED_NAMES)
    assert len(set(TRACKED_NAMES.values())) == len(TRACKED_NAMES)
    record = IterationRecord(
        iteration=0, step=1, completions=8, completion_tokens=40, truncated_answers=2, phase_seconds={"generate": None}
    )
    assert tracked_scalars(record) == {
        "train/completions/count": 8.0,
        "train/completions/tokens": 40.0,
        "train/completions/clipped": 2.0,
        "train/completions/mean_length": 5.0,
        "train/completions/clipped_ratio": 0.25,
    }


def test_project_and_run_name_are_config_keys():
    config = load_config(overrides=["project=ablations", "run_name=sigma-0.01"])
    assert (config.project, config.run_name) == ("ablations", "sigma-0.01")
