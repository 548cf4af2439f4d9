"""The Ray launcher (fleet.launcher=ray): its config checks and actor options, then, on a real Ray cluster of two
nodes started on loopback (tests/ray_cluster.py, slow), server actors spread over the nodes behind the run's token,
a server that cannot load failing the start by name, and actors killed mid-run (bench/ray_chaos.py) ending on the
update log of an undisturbed run, byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from seedcast.optimizer import ray_config
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.fleet.client import ClientSecurity
from seedcast.optimizer.fleet.ray_launcher import RayFleet, RayServerError, actor_options, gpus_per_server
from seedcast.optimizer.preflight import preflight
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from tests.ray_cluster import LocalRayCluster, free_port

REPO_ROOT = Path(__file__).resolve().parents[3]
RAY_FLEET = ["fleet.launcher=ray", "fleet.local=2", "fleet.ray.host=127.0.0.1"]


def test_every_problem_of_a_ray_fleet_is_named_at_once(monkeypatch):
    monkeypatch.setattr(ray_config, "ray_installed", lambda: False)  # a test double for a machine without Ray
    with pytest.raises(ConfigError) as raised:
        load_config(
            overrides=[
                "fleet.launcher=ray",
                "fleet.local=0",
                "fleet.servers=[127.0.0.1:1]",
                "fleet.local_devices=[cuda:0]",
            ]
        )
    message = str(raised.value)
    for expected in (
        "set fleet.local=N",
        "leave fleet.local_devices out",
        "set fleet.insecure=true on the cluster's private network",
        "pip install 'seedcast[ray]'",
    ):
        assert expected in message


def test_a_ray_fleet_on_loopback_or_a_trusted_network_is_accepted():
    assert load_config(overrides=RAY_FLEET).fleet.launcher == "ray"
    assert load_config(overrides=["fleet.launcher=ray", "fleet.insecure=true"]).fleet.ray.host is None


@pytest.mark.parametrize(
    ("setting", "device", "resources", "gpus"),
    [
        ("auto", "auto", {"CPU": 16, "GPU": 8}, 1),
        ("auto", "auto", {"CPU": 16}, 0),
        ("auto", "cpu", {"GPU": 8}, 0),
        ("2", "auto", {}, 2),
    ],
)
def test_gpus_per_server(setting, device, resources, gpus):
    config = load_config(overrides=[*RAY_FLEET, f"fleet.ray.gpus_per_server={setting}", f"model.device={device}"])
    assert gpus_per_server(config, resources) == gpus


def test_a_server_spanning_several_gpus_reserves_them_all():
    overrides = [*RAY_FLEET, "model.backend=vllm", "model.tensor_parallel_size=2", "model.pipeline_parallel_size=2"]
    assert gpus_per_server(load_config(overrides=overrides), {"GPU": 8}) == 4


def test_actors_are_spread_over_the_nodes_unless_packed():
    config = load_config(overrides=[*RAY_FLEET, "fleet.ray.max_restarts=5", "fleet.ray.cpus_per_server=4"])
    options = actor_options(config, "run-server-0", 1.0)
    assert options["scheduling_strategy"] == "SPREAD" and options["max_restarts"] == 5
    assert (options["num_cpus"], options["num_gpus"], options["name"]) == (4.0, 1.0, "run-server-0")
    packed = load_config(overrides=[*RAY_FLEET, "fleet.ray.placement=pack"])
    assert actor_options(packed, "x", 0.0)["scheduling_strategy"] == "DEFAULT"


def test_the_model_path_of_a_ray_fleet_is_the_nodes_not_checked_here(tmp_path):
    missing = str(tmp_path / "only-on-the-cluster")
    problems = preflight(load_config(overrides=[*RAY_FLEET, f"model.name={missing}"]))
    assert problems  # the task loaded; the model path was left to the nodes
    with pytest.raises(Exception, match="only-on-the-cluster"):
        preflight(load_config(overrides=[f"model.name={missing}"]))  # a local fleet's path is checked


def test_a_cluster_address_nothing_answers_is_named_at_once(tmp_path):
    config = load_config(overrides=[*RAY_FLEET, f"fleet.ray.address=127.0.0.1:{free_port()}"])
    fleet = RayFleet(config, tmp_path / "run" / "logs")
    started = time.monotonic()
    with pytest.raises(RayServerError, match="no Ray cluster answers at fleet.ray.address"):
        fleet.start("table")
    assert time.monotonic() - started < 30 and fleet.actors == []


@pytest.fixture(scope="module")
def ray_cluster():
    with LocalRayCluster(nodes=2, cpus_per_node=2) as cluster:
        yield cluster


def _state(address: str, token: str | None) -> pb.ServerState:
    with grpc.insecure_channel(address) as channel:
        metadata = [("authorization", f"Bearer {token}")] if token else None
        return pb_grpc.InferenceServerStub(channel).GetState(pb.StateRequest(), timeout=30, metadata=metadata)


@pytest.mark.slow
def test_server_actors_spread_over_the_nodes_behind_the_runs_token(ray_cluster, tiny_model_dir, tmp_path):
    config = load_config(
        overrides=[*RAY_FLEET, f"model.name={tiny_model_dir}", f"fleet.ray.address={ray_cluster.address}"]
    )
    fleet = RayFleet(config, tmp_path / "run" / "logs")
    try:
        addresses = fleet.start("table")
        assert len({placement["node_id"] for placement in fleet.placements}) == 2  # one actor on each node
        assert fleet.current_addresses() == addresses
        for address in addresses:
            assert _state(address, fleet.token).model == tiny_model_dir
            with pytest.raises(grpc.RpcError) as refused:
                _state(address, None)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert fleet.client_security(ClientSecurity(token="other")).token == fleet.token
    finally:
        fleet.stop()
    for address in addresses:  # torn down: nothing listens there any more
        with pytest.raises(grpc.RpcError):
            _state(address, fleet.token)


@pytest.mark.slow
def test_a_server_that_cannot_load_fails_the_start_by_name(ray_cluster, tmp_path):
    missing = str(tmp_path / "no-such-model")
    config = load_config(overrides=[*RAY_FLEET, f"model.name={missing}", f"fleet.ray.address={ray_cluster.address}"])
    fleet = RayFleet(config, tmp_path / "run" / "logs")
    with pytest.raises(RayServerError, match="no-such-model"):
        fleet.start("table")
    assert fleet.actors == []


@pytest.mark.slow
def test_a_server_the_cluster_cannot_hold_is_refused_before_any_actor_waits(ray_cluster, tmp_path):
    overrides = [*RAY_FLEET, "fleet.ray.gpus_per_server=1", f"fleet.ray.address={ray_cluster.address}"]
    fleet = RayFleet(load_config(overrides=overrides), tmp_path / "run" / "logs")
    with pytest.raises(RayServerError, match="each server actor reserves 1 CPU and 1 GPU, but the whole Ray cluster"):
        fleet.start("table")
    assert fleet.actors == []


@pytest.mark.slow
def test_killing_server_actors_mid_run_loses_nothing(ray_cluster, tiny_model_dir, tmp_path):
    report_path = tmp_path / "report.json"
    arguments = ["--model", tiny_model_dir, "--iterations", "24", "--kills", "2", "--ray-address", ray_cluster.address]
    completed = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "bench" / "ray_chaos.py"),
            *arguments,
            "--workdir",
            str(tmp_path / "w"),
            "--json",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO_ROOT,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["kills"] == 2 and report["restarts_found"] == 2 and report["rejoins"] >= 2, report
    assert report["update_log_identical"] and report["fingerprint_identical"]
