"""Fault injection on real server processes: SIGKILL and restart mid-iteration, SIGSTOP, and a
SIGKILLed optimizer resumed — each run must end with the weights of a run without faults."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer
from tests.server_processes import ServerProcess

ITERATIONS = 4


def _overrides(model_dir: str, iterations: int = ITERATIONS, **extra) -> list[str]:
    values = {
        "model.name": model_dir,
        "model.dtype": "bfloat16",
        "iterations": iterations,
        "batch_size": 2,
        "eval_every": 0,
        "task.evaluator": "tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size": 50,
        "sampling.max_new_tokens": 24,
        "sampling.temperature": 1.0,
        "es.population": 8,
        "es.sigma": 0.05,
        "es.learning_rate": 0.01,
        "fleet.threads_per_server": 1,
        **extra,
    }
    return [f"{key}={value}" for key, value in values.items()]


def _train(run_path, overrides, on_report=None):
    config = load_config(overrides=overrides)
    run = RunDirectory.create(run_path, config)
    result = asyncio.run(Trainer(config, run, show_progress=False, on_report=on_report).train())
    return run, result


@pytest.fixture(scope="module")
def reference_fingerprint(tmp_path_factory, tiny_model_dir):
    """The same run on one local server, no faults."""
    _, result = _train(tmp_path_factory.mktemp("reference") / "run", _overrides(tiny_model_dir, **{"fleet.local": 1}))
    return result.fingerprint


@pytest.fixture()
def servers(tmp_path, tiny_model_dir):
    started = []

    def launch(count: int) -> list[ServerProcess]:
        for index in range(count):
            started.append(ServerProcess(tiny_model_dir, tmp_path, f"server-{index}"))
        for server in started:
            server.start()
        return started

    yield launch
    for server in started:
        server.stop()


def _fleet(servers: list[ServerProcess]) -> dict[str, str]:
    return {"fleet.local": 0, "fleet.servers": f"[{','.join(s.address for s in servers)}]"}


def test_killed_servers_are_replaced_and_rejoin_with_identical_results(
    tmp_path, tiny_model_dir, servers, reference_fingerprint
):
    fleet = servers(3)
    seen = []
    killed_in: list[int] = []

    def kill_one_mid_iteration(report):
        iteration, position = divmod(len(seen), 8)  # every member of an iteration reports exactly once
        seen.append(report)
        if position != 1 or iteration >= ITERATIONS - 1:
            return
        # Kill a server other than the one that just answered: with a full queue it is mid-member.
        alive = [s for s in fleet if s.address != report.server and s.process.poll() is None]
        if not alive:
            return
        alive[0].kill()
        killed_in.append(iteration)
        # Restart on the same port (it reloads the base model). Waiting for it here blocks the optimizer's
        # loop for a few seconds, which makes the test deterministic: the server is back before the next
        # iteration's readmission, so it must rejoin then.
        alive[0].start()

    _, result = _train(
        tmp_path / "run",
        _overrides(tiny_model_dir, **_fleet(fleet), **{"fleet.rejoin_timeout_seconds": 5}),
        on_report=kill_one_mid_iteration,
    )
    rows = [r for r in result.metrics if r.iteration >= 0]
    assert sum(r.members_reassigned for r in rows) >= 1
    assert all(r.members_ok == 8 for r in rows), [r.members_ok for r in rows]
    assert result.fingerprint == reference_fingerprint
    assert len(killed_in) >= 2
    assert max(r.servers_active for r in rows[1:]) == 3, "restarted servers must rejoin after a Sync"


def test_a_stalled_server_does_not_stall_the_run(tmp_path, tiny_model_dir, servers, reference_fingerprint):
    fleet = servers(2)
    paused = []

    def pause_the_other_server(report):
        if not paused:
            victim = next(s for s in fleet if s.address != report.server)
            victim.pause()
            paused.append(victim)

    started = time.monotonic()
    _, result = _train(
        tmp_path / "run",
        _overrides(tiny_model_dir, **_fleet(fleet), **{"fleet.member_deadline_seconds": 3}),
        on_report=pause_the_other_server,
    )
    elapsed = time.monotonic() - started
    rows = [r for r in result.metrics if r.iteration >= 0]
    assert paused and sum(r.members_dropped for r in rows) >= 1
    assert rows[0].seconds < 3 + 15, "the stalled server held the iteration past its deadline"
    assert elapsed < 120
    assert result.fingerprint == reference_fingerprint


@pytest.mark.slow
def test_optimizer_killed_at_random_points_resumes_to_the_same_weights(tmp_path, tiny_model_dir, servers):
    iterations = 20
    _, reference = _train(
        tmp_path / "reference", _overrides(tiny_model_dir, iterations=iterations, **{"fleet.local": 1})
    )
    fleet = servers(2)
    run_dir = tmp_path / "run"
    rng = random.Random(1234)
    command = [
        sys.executable,
        "-m",
        "seedcast.cli",
        "train",
        "--no-progress",
        "--run-dir",
        str(run_dir),
        *_overrides(tiny_model_dir, iterations=iterations, **_fleet(fleet)),
    ]
    steps_at_kill = []
    for target in sorted(rng.sample(range(1, iterations), 3)):
        log = (tmp_path / "optimizer.log").open("ab")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        # Kill at a random point: once the log reaches a random step, plus a random part of an iteration.
        updates = run_dir / "updates.jsonl"
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if updates.exists() and updates.read_bytes().count(b"\n") >= target:
                time.sleep(rng.uniform(0.0, 0.3))
                break
            time.sleep(0.005)
        process.kill()  # SIGKILL, at whatever point it has reached
        process.wait()
        steps_at_kill.append(len(RunDirectory(run_dir).updates()))
        command = [sys.executable, "-m", "seedcast.cli", "train", "--no-progress", "--resume", str(run_dir)]
    final = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]
    assert any(0 < steps < iterations for steps in steps_at_kill), (  # killed mid-run, not at start
        steps_at_kill,
        (tmp_path / "optimizer.log").read_text()[-3000:],
    )
    run = RunDirectory(run_dir)
    assert [r.step for r in run.updates()] == list(range(1, iterations + 1))
    assert run.metrics()[-1].fingerprint == reference.fingerprint


def test_a_server_added_to_the_servers_file_joins_mid_run(tmp_path, tiny_model_dir, servers, reference_fingerprint):
    first, second = servers(2)
    listing = tmp_path / "servers.txt"
    listing.write_text(f"# the fleet\n{first.address}\n")
    answered_by = []

    def add_the_second_server(report):
        if not answered_by:
            listing.write_text(f"{first.address}\n{second.address}  # joined mid-run\n")
        answered_by.append(report.server)

    _, result = _train(
        tmp_path / "run",
        _overrides(tiny_model_dir, **{"fleet.local": 0, "fleet.servers_file": listing}),
        on_report=add_the_second_server,
    )
    assert set(answered_by[:8]) == {first.address}  # iteration 0 ran on the first server alone
    assert second.address in answered_by[8:]  # the second joined after a Sync and took members
    assert result.metrics[-1].servers_active == 2
    assert result.fingerprint == reference_fingerprint


def test_resume_refuses_a_server_that_holds_other_weights_at_the_logged_step(tmp_path, tiny_model_dir, servers, capsys):
    from seedcast.cli import main
    from seedcast.optimizer.es.step import ESStep

    honest, impostor = servers(2)
    run, result = _train(tmp_path / "run", _overrides(tiny_model_dir, iterations=2, **_fleet([honest])))

    other = [ESStep(step=s, sigma=0.05, terms=[(10_000 + s, 0.01)]) for s in (1, 2)]
    wrong = asyncio.run(_sync_to(impostor, other))  # the impostor holds another run's first two steps
    code = main(["train", "--resume", str(run.path), "--no-progress", "--servers", impostor.address, "iterations=3"])
    error = capsys.readouterr().err
    assert code == 2 and impostor.address in error and wrong in error and result.fingerprint in error
    assert len(run.updates()) == 2  # nothing trained on the wrong weights
    # The server that trained it still holds the logged weights: the run goes on there.
    assert main(["train", "--resume", str(run.path), "--no-progress", "--servers", honest.address, "iterations=3"]) == 0
    assert len(run.updates()) == 3


async def _sync_to(server: ServerProcess, steps) -> str:
    """Replay `steps` on a running server (as another run would have); its fingerprint after them."""
    from seedcast.optimizer.fleet.client import ServerClient

    client = ServerClient(server.address)
    try:
        return (await client.sync(steps)).weights_fingerprint
    finally:
        await client.close()


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_local_servers_do_not_outlive_a_killed_optimizer(tmp_path, tiny_model_dir):
    import json
    import signal

    import yaml

    run_dir = tmp_path / "run"
    optimizer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seedcast.cli",
            "train",
            "--no-progress",
            "--run-dir",
            str(run_dir),
            *_overrides(tiny_model_dir, iterations=1000, **{"fleet.local": 1}),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        ready = None
        while time.monotonic() < deadline:
            options = run_dir / "logs" / "server-0.yaml"
            if options.is_file():
                ready_file = yaml.safe_load(options.read_text())["ready_file"]
                if ready_file and Path(ready_file).exists():
                    ready = json.loads(Path(ready_file).read_text())
                    break
            time.sleep(0.2)
        assert ready, "the local server did not start"
        assert _alive(ready["pid"])
        optimizer.send_signal(signal.SIGKILL)
        optimizer.wait()
        deadline = time.monotonic() + 15
        while _alive(ready["pid"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(ready["pid"]), "the local server outlived its optimizer"
    finally:
        if optimizer.poll() is None:
            optimizer.kill()


def _state_after_a_stop_mid_broadcast(run) -> None:
    """What a SIGKILL while step N was being broadcast leaves: step N in the durable log, not in metrics.jsonl."""
    run.truncate_metrics(len(run.updates()) - 1)
    assert run.metrics() and all(record.step < len(run.updates()) for record in run.metrics())


def test_a_resume_after_a_stop_mid_broadcast_checks_the_servers_against_the_durable_log(
    tmp_path, tiny_model_dir, servers, capsys
):
    from seedcast.cli import main
    from seedcast.optimizer.es.step import ESStep

    honest, impostor, fresh, rival = servers(4)
    run, result = _train(tmp_path / "run", _overrides(tiny_model_dir, iterations=2, **_fleet([honest])))
    _state_after_a_stop_mid_broadcast(run)

    def resume(*servers_given, iterations: int = 3) -> int:
        addresses = ",".join(s.address for s in servers_given)
        arguments = ["--servers", addresses, f"iterations={iterations}"]
        return main(["train", "--resume", str(run.path), "--no-progress", *arguments])

    other = [ESStep(step=1, sigma=0.05, terms=[(10_001, 0.01)])]
    wrong = asyncio.run(_sync_to(impostor, other))  # another run's first step: behind the log, with other weights
    assert resume(impostor) == 2
    error = capsys.readouterr().err
    assert impostor.address in error and wrong in error and "at step 1" in error
    assert len(run.updates()) == 2  # nothing trained on unchecked weights
    # A server from the base model is checked at step 1 and then takes step 2; the one that trained agrees.
    assert resume(fresh, honest) == 0
    assert len(run.updates()) == 3 and run.logged_steps()[1] == result.fingerprint

    # Stopped again while broadcasting step 3, after every server took it (a SIGKILL in the optimizer's
    # last moments): each reports the weights it applied step 3 to, which the log's step 3 records.
    _state_after_a_stop_mid_broadcast(run)
    before_3 = run.logged_steps()[1]
    held = asyncio.run(_sync_to(honest, []))  # an empty Sync answers the fingerprint held
    asyncio.run(_sync_to(rival, [ESStep(step=s, sigma=0.05, terms=[(20_000 + s, 0.01)]) for s in (1, 2, 3)]))
    assert resume(rival, iterations=4) == 2  # another run's three steps, in one Sync
    error = capsys.readouterr().err
    assert f"records fingerprint {before_3} before step 3" in error and f"{rival.address} applied it to" in error
    assert resume(honest, fresh, iterations=4) == 0
    assert len(run.updates()) == 4 and run.logged_steps()[1] == held


def test_a_noise_kind_edited_in_config_yaml_is_caught_after_a_stop_mid_broadcast(tmp_path, tiny_model_dir, capsys):
    import yaml

    from seedcast.cli import main

    run, _ = _train(tmp_path / "run", _overrides(tiny_model_dir, iterations=2, **{"fleet.local": 1}))
    _state_after_a_stop_mid_broadcast(run)
    snapshot = yaml.safe_load((run.path / "config.yaml").read_text())
    assert snapshot["es"]["noise"] == "table"  # es.noise=auto became table on this CPU fleet
    snapshot["es"]["noise"] = "gaussian"
    (run.path / "config.yaml").write_text(yaml.safe_dump(snapshot))
    assert main(["train", "--resume", str(run.path), "--no-progress", "iterations=3"]) == 2
    assert "records fingerprint" in capsys.readouterr().err and len(run.updates()) == 2


def test_a_server_with_another_model_is_refused_before_step_one(tmp_path, tiny_model_dir, servers, capsys):
    from seedcast.cli import main

    (server,) = servers(1)
    overrides = _overrides(tiny_model_dir, iterations=1, **_fleet([server]))
    run_dir = tmp_path / "run"
    other = [o for o in overrides if not o.startswith("model.name=")] + ["model.name=smollm2-135m-instruct"]
    assert main(["train", "--run-dir", str(run_dir), "--no-progress", *other]) == 2
    error = capsys.readouterr().err
    assert f"server {server.address} serves the model {tiny_model_dir!r}" in error
    assert "model.name is 'smollm2-135m-instruct'" in error and not run_dir.exists()  # asked before it is made


def test_the_model_of_a_run_cannot_change_on_resume(tmp_path, tiny_model_dir):
    from seedcast.optimizer.config import ConfigError

    config = load_config(overrides=_overrides(tiny_model_dir, iterations=1))
    run = RunDirectory.create(tmp_path / "run", config)
    with pytest.raises(ConfigError, match="model.name is fixed for a run"):
        run.load_config(["model.name=smollm2-135m-instruct"])
    assert run.load_config(["iterations=5"]).iterations == 5
