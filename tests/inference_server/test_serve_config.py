"""`seedcast serve`'s options: one ServeConfig, flags generated from it, files and flags merged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seedcast.cli import build_parser, main
from seedcast.inference_server.serve_config import (
    ServeConfig,
    ServeConfigError,
    load_serve_config,
    serve_config_from_args,
    write_serve_config,
)
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.fleet.local import LocalFleet


def _parse(*argv: str) -> ServeConfig:
    return serve_config_from_args(build_parser().parse_args(["serve", *argv]))


def test_every_field_has_a_flag_and_unset_flags_keep_the_defaults():
    help_text = build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    for name in ServeConfig.model_fields:
        flag = "--allow-evaluator" if name == "allowed_evaluators" else "--" + name.replace("_", "-")
        assert flag in help_text, flag
    assert _parse() == ServeConfig()


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "server.yaml"
    write_serve_config(ServeConfig(port=7000, threads=3, allowed_evaluators=["remote:https://rm.internal/"]), path)
    config = _parse("--config", str(path), "--port", "7001", "--pair-cache", "--allow-evaluator", "mypkg.")
    assert (config.port, config.threads, config.pair_cache) == (7001, 3, True)
    assert config.allowed_evaluators == ["mypkg."]


def test_every_problem_is_reported_at_once(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("backend: tpu\nport: -1\ncolour: blue\n")
    with pytest.raises(ServeConfigError) as error:
        load_serve_config(path)
    message = str(error.value)
    assert "3 server option problem(s)" in message
    assert "unknown backend 'tpu'" in message and "--port" in message and "colour: unknown option" in message


def test_options_of_another_backend_are_refused_by_name(capsys):
    with pytest.raises(ServeConfigError, match="--cpu-cores applies to --backend vllm only"):
        load_serve_config(values={"backend": "hf", "cpu_cores": "0-1"})
    assert main(["serve", "--gpu-memory-utilization", "0.5"]) == 2
    assert "--gpu-memory-utilization applies to --backend vllm only" in capsys.readouterr().err


def test_each_backend_receives_only_its_options():
    hf = ServeConfig(threads=2).backend_options()
    assert set(hf) == {"model", "device", "dtype", "threads", "noise", "lowrank_targets", "pair_cache"}
    assert hf["threads"] == 2
    assert hf["pair_cache"] == "auto" and "pair_cache" not in ServeConfig(pair_cache=False).backend_options()
    assert "pair_cache" not in ServeConfig(backend="vllm").backend_options()  # auto is off where it does not exist
    vllm = ServeConfig(backend="vllm", kv_cache_gib=2.0, pair_cache=True).backend_options()
    assert {"cpu_cores", "kv_cache_gib", "gpu_memory_utilization", "pair_cache", "batch_members"} <= set(vllm)


def test_local_vllm_servers_are_started_to_batch_the_runs_member_groups(tmp_path):
    lowrank = ["es.perturbation=lowrank", "es.rank=4", "fleet.members_per_batch=8", "fleet.local=1"]
    vllm = load_config(overrides=[*lowrank, "model.backend=vllm", "es.lowrank_targets=linear"])
    options = LocalFleet(vllm, tmp_path).serve_config(0)
    assert (options.batch_members, options.batch_max_rank, options.lowrank_targets) == (8, 4, "linear")
    hf = LocalFleet(load_config(overrides=lowrank), tmp_path).serve_config(0)
    assert (hf.batch_members, hf.lowrank_targets) == (0, "all")  # hf batches without LoRA slots
    with pytest.raises(ConfigError, match="set es.lowrank_targets=linear: vllm servers batch members"):
        load_config(overrides=[*lowrank, "model.backend=vllm"])


def test_local_servers_get_the_runs_model_noise_and_evaluator(tmp_path):
    config = load_config(
        overrides=["es.noise=table", "fleet.pair_cache=true", "fleet.local=2", "fleet.local_metrics_port=9100"]
    )
    fleet = LocalFleet(config, tmp_path)
    written = tmp_path / "server-1.yaml"
    write_serve_config(fleet.serve_config(1), written)
    served = load_serve_config(written)
    assert (served.noise, served.pair_cache, served.port, served.metrics_port) == ("table", True, 0, 9101)
    assert served.allowed_evaluators == ["synthetic"] and served.model == config.model.name


def test_the_pair_cache_flag_is_auto_unless_forced_either_way():
    assert (_parse().pair_cache, _parse("--pair-cache").pair_cache, _parse("--no-pair-cache").pair_cache) == (
        "auto",
        True,
        False,
    )


def test_the_pair_cache_is_on_by_default_only_on_a_cpu_with_room():
    import torch

    from seedcast.inference_server.backends.devices import available_memory_bytes, pair_cache_by_default

    free = available_memory_bytes(torch.device("cpu"))
    assert free is not None and free > 0
    assert pair_cache_by_default(torch.device("cpu"), free // 8) is True
    assert pair_cache_by_default(torch.device("cpu"), free // 2) is False  # four more copies would not fit
    assert pair_cache_by_default(torch.device("meta"), 1) is False  # not a CPU: off unless asked for


@pytest.mark.parametrize(("option", "value"), [("parent_pid", True), ("insecure", "yes"), ("port", "50051")])
def test_a_yaml_value_of_another_type_is_refused_not_coerced(option, value):
    with pytest.raises(ServeConfigError, match=f"--{option.replace('_', '-')}: Input should be a valid"):
        load_serve_config(values={option: value})


def test_a_parent_pid_that_is_not_the_parent_is_refused_before_the_model_loads(tmp_path):
    command = [sys.executable, "-m", "seedcast.inference_server", "--parent-pid", "1", "--port", "0"]
    done = subprocess.run([*command, "--model", str(tmp_path / "no-model")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--parent-pid 1 is not this server's parent" in done.stderr
    assert "no-model" not in done.stderr  # refused before the model was looked for


@pytest.mark.parametrize(
    "allowance", ["remote:", "remote:https:", "remote:https://", "remote:file:///etc/passwd", "remote:https://host"]
)
def test_a_remote_allowance_must_name_its_endpoints(allowance):
    with pytest.raises(ServeConfigError, match="name the endpoint"):
        load_serve_config(values={"allowed_evaluators": [allowance]})


def test_only_the_named_remote_endpoints_may_be_called():
    from seedcast.inference_server.validation import Limits

    limits = Limits(allowed_evaluators=("remote:https://rm.internal:8000/", "remote:http://other.test/score"))
    assert limits.evaluator_allowed("remote:https://rm.internal:8000/v1/score")
    assert limits.evaluator_allowed("remote:http://other.test/score")
    for spec in (
        "remote:https://rm.internal:8000.evil.test/",
        "remote:http://169.254.169.254/latest/meta-data/",
        "remote:http://other.test/score/more",
    ):
        assert not limits.evaluator_allowed(spec), spec
    assert not Limits(allowed_evaluators=("remote:",)).evaluator_allowed("remote:http://127.0.0.1:9/")
