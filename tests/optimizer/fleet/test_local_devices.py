"""One server per GPU on one box (fleet.local_devices): what each local server is told, checked with a test double
for the GPUs this machine sees, and vLLM's tensor and pipeline parallel sizes as server options."""

from __future__ import annotations

import pytest

from seedcast.inference_server.serve_config import ServeConfigError, load_serve_config
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.fleet import local
from seedcast.optimizer.fleet.local import LocalFleet, LocalServerError


def _fleet(tmp_path, *overrides: str) -> LocalFleet:
    return LocalFleet(load_config(overrides=["fleet.local=3", *overrides]), tmp_path)


def test_listed_devices_are_taken_in_turn(tmp_path):
    fleet = _fleet(tmp_path, "fleet.local_devices=[cuda:0,cuda:1]")
    assert [fleet.serve_config(i).device for i in range(3)] == ["cuda:0", "cuda:1", "cuda:0"]
    assert [fleet.placement(i)[1] for i in range(3)] == [{}, {}, {}]  # hf takes the device itself


def test_a_vllm_server_sees_only_its_gpu(tmp_path):
    fleet = _fleet(tmp_path, "fleet.local_devices=[cuda:0,cuda:1]", "model.backend=vllm")
    assert [fleet.serve_config(i).device for i in range(3)] == ["cuda", "cuda", "cuda"]
    assert [fleet.placement(i)[1] for i in range(3)] == [{"CUDA_VISIBLE_DEVICES": v} for v in ("0", "1", "0")]


@pytest.mark.parametrize(("gpus", "devices"), [(2, ["cuda:0", "cuda:1", "cuda:0"]), (0, ["auto", "auto", "auto"])])
def test_auto_spreads_the_servers_over_the_visible_gpus(tmp_path, monkeypatch, gpus, devices):
    monkeypatch.setattr(local, "visible_gpu_count", lambda: gpus)  # a test double for the machine's GPUs
    fleet = _fleet(tmp_path, "fleet.local_devices=auto")
    assert [fleet.serve_config(i).device for i in range(3)] == devices


def test_without_local_devices_every_server_runs_on_model_device(tmp_path):
    fleet = _fleet(tmp_path, "model.device=cpu")
    assert {fleet.serve_config(i).device for i in range(3)} == {"cpu"}


def test_each_process_is_started_with_its_environment(tmp_path, monkeypatch):
    started = []

    class ExitingProcessTestDouble:
        """Stands in for a server process that exits at once, so start() stops after launching them."""

        returncode = 1

        def __init__(self, command, env, **options) -> None:
            started.append(env)

        def poll(self) -> int:
            return 1

    monkeypatch.setattr(local.subprocess, "Popen", ExitingProcessTestDouble)
    fleet = _fleet(tmp_path, "fleet.local_devices=[cuda:1,cuda:2]", "model.backend=vllm")
    monkeypatch.setattr(fleet, "stop", lambda: None)
    with pytest.raises(LocalServerError):
        fleet.start()
    assert [env["CUDA_VISIBLE_DEVICES"] for env in started] == ["1", "2", "1"]
    assert all("PATH" in env for env in started)  # the rest of the environment is kept


def test_bad_device_lists_are_refused_by_name():
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["fleet.local_devices=[gpu0,cuda:1]"])
    assert "'gpu0' is not cpu, cuda or cuda:N" in str(raised.value)
    with pytest.raises(ConfigError, match="an empty list"):
        load_config(overrides=["fleet.local_devices=[]"])


def test_parallel_sizes_are_vllm_server_options():
    options = load_serve_config(values={"backend": "vllm", "tensor_parallel_size": 2, "pipeline_parallel_size": 2})
    assert {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}.items() <= options.backend_options().items()
    with pytest.raises(ServeConfigError, match="--tensor-parallel-size applies to --backend vllm only"):
        load_serve_config(values={"tensor_parallel_size": 2})


@pytest.mark.parametrize(("gpus", "expected"), [(4, ["0,1", "2,3", "0,1"]), (5, ["0,1", "2,3", "0,1"])])
def test_a_server_spanning_several_gpus_takes_them_as_a_group(tmp_path, monkeypatch, gpus, expected):
    monkeypatch.setattr(local, "visible_gpu_count", lambda: gpus)  # a test double for the machine's GPUs
    fleet = _fleet(tmp_path, "fleet.local_devices=auto", "model.backend=vllm", "model.tensor_parallel_size=2")
    assert [fleet.placement(i) for i in range(3)] == [("cuda", {"CUDA_VISIBLE_DEVICES": g}) for g in expected]
    assert {(fleet.serve_config(i).tensor_parallel_size, fleet.serve_config(i).device) for i in range(3)} == {
        (2, "cuda")
    }


def test_tensor_times_pipeline_parallel_gpus_make_a_group(tmp_path):
    overrides = ["model.backend=vllm", "model.tensor_parallel_size=2", "model.pipeline_parallel_size=2"]
    fleet = _fleet(tmp_path, "fleet.local_devices=[cuda:4,cuda:5,cuda:6,cuda:7]", *overrides)
    assert fleet.placement(1) == ("cuda", {"CUDA_VISIBLE_DEVICES": "4,5,6,7"})
    assert fleet.serve_config(0).pipeline_parallel_size == 2


def test_too_few_gpus_for_one_group_is_named(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="list at least 2 GPUs as cuda:N"):
        load_config(overrides=["fleet.local_devices=[cuda:0]", "model.backend=vllm", "model.tensor_parallel_size=2"])
    monkeypatch.setattr(local, "visible_gpu_count", lambda: 1)
    fleet = _fleet(tmp_path, "fleet.local_devices=auto", "model.backend=vllm", "model.tensor_parallel_size=2")
    with pytest.raises(LocalServerError, match="must list at least 2 GPUs"):
        fleet.serve_config(0)


def test_parallel_sizes_need_the_vllm_backend():
    with pytest.raises(ConfigError, match="on the vllm backend only"):
        load_config(overrides=["model.tensor_parallel_size=2"])
