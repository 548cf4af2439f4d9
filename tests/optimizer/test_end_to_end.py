"""End to end over real gRPC on loopback: an optimizer and local server processes on the tiny model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import torch

from seedcast.cli import main
from seedcast.inference_server.noise.apply import weights_fingerprint
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer


def _overrides(model_dir: str, **extra) -> list[str]:
    values = {
        "model.name": model_dir,
        "model.dtype": "bfloat16",
        "iterations": 2,
        "batch_size": 3,
        "eval_every": 1,
        "eval_size": 4,
        "task.evaluator": "tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size": 50,
        "sampling.max_new_tokens": 6,
        "sampling.temperature": 1.0,
        "es.population": 4,
        "es.sigma": 0.05,
        "es.learning_rate": 0.01,
        "fleet.local": 2,
        "fleet.threads_per_server": 1,
        **extra,
    }
    return [f"{key}={value}" for key, value in values.items()]


def _train(run_path, overrides):
    config = load_config(overrides=overrides)
    run = RunDirectory.create(run_path, config)
    return run, asyncio.run(Trainer(config, run, show_progress=False).train())


def test_two_servers_two_iterations(tmp_path, tiny_model_dir):
    token = tmp_path / "token"
    token.write_text("a-token-for-the-local-servers-42\n")  # local servers require it; the optimizer sends it
    run, result = _train(tmp_path / "run", _overrides(tiny_model_dir, **{"fleet.token_file": token}))
    rows = [r for r in result.metrics if r.iteration >= 0]
    assert [r.iteration for r in rows] == [0, 1]
    assert all(r.members_ok == 4 and r.members_failed == 0 for r in rows)
    assert all(0 <= r.reward_mean <= 1 and r.completion_tokens > 0 for r in rows)
    assert all(r.update_terms > 0 for r in rows), "graded rewards must produce non-empty updates"
    assert result.metrics[0].eval_reward is not None  # base-model evaluation before training
    assert [r.step for r in run.updates()] == [1, 2]
    assert result.fingerprint == rows[-1].fingerprint
    logs = sorted(p.name for p in run.logs_path.iterdir())
    assert logs == ["server-0.log", "server-0.yaml", "server-1.log", "server-1.yaml"]  # its log and its options


def test_resume_equals_uninterrupted_run_and_export_reproduces_it(tmp_path, tiny_model_dir):
    overrides = _overrides(tiny_model_dir, **{"fleet.local": 1, "eval_every": 0, "iterations": 3})
    full_run, full = _train(tmp_path / "full", overrides)

    part_overrides = [o for o in overrides if not o.startswith("iterations=")] + ["iterations=2"]
    part_run, _ = _train(tmp_path / "part", part_overrides)
    assert main(["train", "--resume", str(part_run.path), "--no-progress", "iterations=3"]) == 0
    assert part_run.updates_path.read_text() == full_run.updates_path.read_text()
    assert part_run.metrics()[-1].fingerprint == full.fingerprint

    out = tmp_path / "exported"
    assert main(["export", str(full_run.path), "--out", str(out)]) == 0
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert weights_fingerprint(dict(model.named_parameters())) == full.fingerprint
    summary = json.loads((out / "seedcast_export.json").read_text())
    assert summary["matches_servers"] is True and summary["steps"] == 3
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers") and "base_model" not in card.split("---")[1]  # a folder
    for fact in (f"`{full.fingerprint}`", "servers' at that step: yes", "population 4", "| steps | 3 |", "float32"):
        assert fact in card, fact
    assert "not measured during the run" in card  # eval_every: 0

    half = tmp_path / "exported-bf16"
    assert main(["export", str(full_run.path), "--out", str(half), "--dtype", "bfloat16"]) == 0
    loaded = AutoModelForCausalLM.from_pretrained(half)
    assert next(loaded.parameters()).dtype == torch.bfloat16 and "saved as bfloat16" in (half / "README.md").read_text()


def test_failing_evaluator_counts_members_as_failed_and_the_run_goes_on(tmp_path, tiny_model_dir):
    overrides = _overrides(
        tiny_model_dir, **{"fleet.local": 1, "eval_every": 0, "task.evaluator": "tests.tiny_model:failing_reward"}
    )
    run, result = _train(tmp_path / "run", overrides)
    assert [r.members_failed for r in result.metrics] == [4, 4]
    assert [r.terms for r in run.updates()] == [[], []]  # no signal, weights unchanged


def test_unreachable_server_is_named(tmp_path, tiny_model_dir, capsys):
    code = main(
        [
            "train",
            "--no-progress",
            "--run-dir",
            str(tmp_path / "run"),
            "--servers",
            "127.0.0.1:9",
            f"model.name={tiny_model_dir}",
            "fleet.connect_timeout_seconds=1",
        ]
    )
    assert code == 2
    assert "cannot reach inference server at 127.0.0.1:9" in capsys.readouterr().err


def test_config_errors_are_reported_before_anything_starts(tmp_path, capsys):
    code = main(["train", "--run-dir", str(tmp_path / "run"), "es.sigma=0", "typo=1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "2 configuration problem(s)" in err and "es.sigma" in err and "typo" in err
    assert not (tmp_path / "run").exists()


def test_the_noise_kind_cannot_change_on_resume(tmp_path, capsys):
    run = RunDirectory.create(tmp_path / "run", load_config(overrides=["es.noise=gaussian"]))
    assert main(["train", "--resume", str(run.path), "es.noise=table"]) == 2
    assert "es.noise is fixed for a run" in capsys.readouterr().err
    snapshot = (run.path / "config.yaml").read_text()
    (run.path / "config.yaml").write_text(snapshot.replace("  noise: gaussian\n", ""))  # a run from before es.noise
    assert "noise" not in (run.path / "config.yaml").read_text()
    assert run.load_config().es.noise == "gaussian"  # what it was trained with, not today's default (auto)
    assert run.load_config(["es.noise=gaussian"]).es.noise == "gaussian"
    with pytest.raises(ValueError, match="trained with es.noise = .gaussian."):
        run.load_config(["es.noise=table"])


def test_corrupt_run_directory_on_resume(tmp_path, capsys):
    run = RunDirectory.create(tmp_path / "run", load_config())
    run.updates_path.write_text('{"step":1,"sigma":0.1,"terms":[],"checksum":"bad"}\n{"step":2}\n')
    assert main(["train", "--resume", str(run.path)]) == 2
    assert "corrupt update record" in capsys.readouterr().err
    assert main(["train", "--resume", str(tmp_path / "nothing-here")]) == 2
    assert "not a run directory" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "serve", "export", "plot"])
def test_help_documents_every_option(command, capsys):
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "usage: seedcast" in text
    for line in text.splitlines():
        if line.strip().startswith("--") and "  " in line.strip():
            assert line.strip().split("  ", 1)[1].strip(), f"undocumented option: {line}"


def test_table_noise_run_is_reproduced_by_export(tmp_path, tiny_model_dir):
    overrides = _overrides(tiny_model_dir, **{"fleet.local": 1, "eval_every": 0, "es.noise": "table"})
    run, _ = _train(tmp_path / "run", overrides)
    assert all(record.terms for record in run.updates())
    out = tmp_path / "exported"
    assert main(["export", str(run.path), "--out", str(out)]) == 0  # replays with the run's table noise
    assert json.loads((out / "seedcast_export.json").read_text())["matches_servers"] is True


def test_a_server_with_another_noise_kind_is_refused_by_name(tmp_path, tiny_model_dir, capsys):
    from tests.server_processes import ServerProcess

    server = ServerProcess(tiny_model_dir, tmp_path, "gaussian-server", ("--noise", "gaussian")).start()
    try:
        code = main(
            [
                "train",
                "--no-progress",
                "--run-dir",
                str(tmp_path / "run"),
                "--servers",
                server.address,
                f"model.name={tiny_model_dir}",
                "es.noise=table",
                "task.evaluator=tests.tiny_model:digit_fraction_reward",
            ]
        )
    finally:
        server.stop()
    assert code == 2
    err = capsys.readouterr().err
    assert f"server {server.address} perturbs with 'gaussian' noise but this run uses table noise" in err
    assert "seedcast serve --noise table" in err


def test_a_low_rank_run_is_reproduced_across_fleets_by_a_resume_and_by_export(tmp_path, tiny_model_dir):
    low_rank = {"eval_every": 0, "iterations": 3, "es.perturbation": "lowrank", "es.rank": 2}
    two_servers, two = _train(tmp_path / "two", _overrides(tiny_model_dir, **low_rank))
    steps = two_servers.updates()
    assert [s.rank for s in steps] == [2, 2, 2] and all(s.terms for s in steps)

    # One server, stopped after two steps; the resume's fresh server replays them by Sync, then takes the third.
    one = _overrides(tiny_model_dir, **{**low_rank, "fleet.local": 1, "iterations": 2})
    one_server, _ = _train(tmp_path / "one", one)
    assert main(["train", "--resume", str(one_server.path), "--no-progress", "iterations=3"]) == 0
    assert one_server.updates_path.read_text() == two_servers.updates_path.read_text()
    assert one_server.metrics()[-1].fingerprint == two.fingerprint

    out = tmp_path / "exported"
    assert main(["export", str(two_servers.path), "--out", str(out)]) == 0
    assert json.loads((out / "seedcast_export.json").read_text())["matches_servers"] is True

    full_rank = _overrides(tiny_model_dir, **{"eval_every": 0, "iterations": 1})
    _, full = _train(tmp_path / "full", full_rank)
    assert full.fingerprint != two_servers.metrics()[0].fingerprint  # the same seeds at full rank move elsewhere


def test_a_linear_targets_run_moves_the_projections_only_and_exports_what_its_servers_hold(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file

    linear = {"eval_every": 0, "iterations": 2, "es.perturbation": "lowrank", "es.lowrank_targets": "linear"}
    run, result = _train(tmp_path / "run", _overrides(tiny_model_dir, **linear, **{"fleet.members_per_batch": 2}))
    assert all(r.members_ok == 4 for r in result.metrics) and any(r.update_terms for r in result.metrics)
    out = tmp_path / "exported"
    assert main(["export", str(run.path), "--out", str(out)]) == 0
    assert json.loads((out / "seedcast_export.json").read_text())["matches_servers"] is True
    trained, base = load_file(out / "model.safetensors"), load_file(Path(tiny_model_dir) / "model.safetensors")
    moved = {name for name in trained if not torch.equal(trained[name], base[name].to(trained[name].dtype))}
    assert moved and all(name.endswith("proj.weight") for name in moved)  # the embedding and norms are frozen


def test_batched_low_rank_members_give_the_same_run_on_one_two_and_three_servers(tmp_path, tiny_model_dir):
    batched = {
        "eval_every": 0,
        "iterations": 2,
        "es.population": 8,
        "es.perturbation": "lowrank",
        "es.rank": 1,
        "fleet.members_per_batch": 4,
    }
    runs = {}
    for servers in (1, 2, 3):
        run, result = _train(
            tmp_path / f"on-{servers}", _overrides(tiny_model_dir, **batched, **{"fleet.local": servers})
        )
        runs[servers] = (run.updates_path.read_text(), result.fingerprint)
        assert all(r.members_ok == 8 and r.members_failed == 0 for r in result.metrics)
        assert all(r.phase_seconds["perturb"] == 0.0 for r in result.metrics)  # generated together: never written
    assert runs[1] == runs[2] == runs[3]
    assert main(["export", str(tmp_path / "on-2"), "--out", str(tmp_path / "exported")]) == 0
    assert json.loads((tmp_path / "exported" / "seedcast_export.json").read_text())["matches_servers"] is True

    # One at a time, the same members are written into the weights: the perturb phase takes time.
    _, serial = _train(tmp_path / "serial", _overrides(tiny_model_dir, **{**batched, "fleet.members_per_batch": 1}))
    assert all(r.phase_seconds["perturb"] > 0.0 for r in serial.metrics)
