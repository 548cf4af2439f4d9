"""A remote fleet's mistakes (a server with another model, an evaluator a server cannot build or may not run) end
before the run folder exists, in one message naming every server's problem, with exit status 2."""

from __future__ import annotations

import asyncio
import threading

import pytest

from seedcast.cli import main
from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.server import start_server
from seedcast.inference_server.validation import Limits
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.preflight import preflight


@pytest.fixture
def remote_servers():
    """Start servers (a test double backend, model "simulated") on loopback in a thread of their own, as a
    fleet this process does not start; yields a function taking each server's Limits, returning addresses."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    running = []

    def launch(*limits: Limits) -> list[str]:
        for each in limits:
            started = start_server(SimulatedLatencyTestBackend(), "127.0.0.1", 0, limits=each)
            running.append(asyncio.run_coroutine_threadsafe(started, loop).result(timeout=30))
        return [f"127.0.0.1:{server.port}" for server in running]

    yield launch
    for server in running:
        asyncio.run_coroutine_threadsafe(server.stop(0), loop).result(timeout=30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=30)


def _train(tmp_path, addresses: list[str], *overrides: str) -> int:
    fleet = [f"fleet.servers=[{','.join(addresses)}]", "fleet.local=0", "fleet.connect_timeout_seconds=5"]
    return main(["train", "--run-dir", str(tmp_path / "run"), "--no-progress", *fleet, *overrides])


def test_every_server_with_another_model_or_no_evaluator_is_named_before_the_run_folder_exists(
    tmp_path, capsys, remote_servers
):
    open_server, strict_server = remote_servers(Limits(allowed_evaluators=None), Limits())
    code = _train(tmp_path, [open_server, strict_server], "model.name=some/other-model", "task.evaluator=tests.nope")
    error = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "run").exists()
    assert f"server {open_server} serves the model 'simulated'" in error
    assert f"server {strict_server} serves the model 'simulated'" in error
    assert f"server {open_server} cannot use this run's evaluator: evaluator 'tests.nope'" in error
    assert f"server {strict_server} cannot use this run's evaluator" in error and "--allow-evaluator" in error


def test_a_fleet_that_serves_the_run_passes_the_check(tmp_path, remote_servers):
    addresses = remote_servers(Limits(), Limits())
    overrides = [f"fleet.servers=[{','.join(addresses)}]", "fleet.local=0", "model.name=simulated"]
    assert preflight(load_config(overrides=overrides))  # the task's problems, no error


def test_an_unreachable_server_is_named_before_the_run_folder_exists(tmp_path, capsys, remote_servers):
    (reachable,) = remote_servers(Limits())
    code = _train(tmp_path, [reachable, "127.0.0.1:1"], "model.name=simulated", "fleet.connect_timeout_seconds=1")
    error = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "run").exists()
    assert "cannot reach inference server at 127.0.0.1:1" in error and reachable not in error


def test_a_server_whose_low_rank_members_perturb_other_tensors_is_named(tmp_path, capsys, remote_servers):
    (address,) = remote_servers(Limits())  # the test double perturbs all tensors
    lowrank = ["model.name=simulated", "es.perturbation=lowrank", "es.lowrank_targets=linear"]
    assert _train(tmp_path, [address], *lowrank) == 2 and not (tmp_path / "run").exists()
    assert "seedcast serve --lowrank-targets linear" in capsys.readouterr().err
