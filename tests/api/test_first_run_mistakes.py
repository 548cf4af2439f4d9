"""A first-time user's mistakes: each ends in one clear line, exit status 2, and nothing half-made."""

from __future__ import annotations

import socket

import pytest

import seedcast
from seedcast.cli import main, parse_args


@pytest.fixture
def taken_port():
    """A port some other program listens on."""
    with socket.socket() as listener:
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.name=/no/such/model"], "model path /no/such/model is neither a folder"),
        (["task.evaluator=no-such-evaluator"], "unknown evaluator 'no-such-evaluator'"),
        (["task.evaluator=no_such_module:reward"], "cannot import module 'no_such_module'"),
        (["task.dataset=gsm8k", "task.path=/no/such/data.jsonl"], "dataset file /no/such/data.jsonl does not exist"),
    ],
)
def test_a_missing_model_evaluator_or_data_file_is_a_config_error_before_the_run_folder_exists(
    tmp_path, capsys, overrides, message
):
    run_dir = tmp_path / "run"
    assert main(["train", "--run-dir", str(run_dir), "--no-progress", *overrides]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and not run_dir.exists()


def test_a_taken_metrics_port_is_one_line_before_the_run_folder_exists(tmp_path, capsys, taken_port):
    run_dir = tmp_path / "run"
    assert main(["train", "--run-dir", str(run_dir), "--no-progress", f"metrics_port={taken_port}"]) == 2
    error = capsys.readouterr().err
    assert f":{taken_port}: the port is in use" in error and "--metrics-port" in error and not run_dir.exists()


@pytest.mark.parametrize("flag", ["--port", "--metrics-port"])
def test_a_taken_server_port_is_one_line_before_the_model_loads(tmp_path, capsys, taken_port, flag):
    ports = {"--port": "0", flag: str(taken_port)}
    argv = ["serve", "--model", str(tmp_path / "no-model"), *[item for pair in ports.items() for item in pair]]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert f"127.0.0.1:{taken_port}: the port is in use" in error and flag in error and "no-model" not in error


def test_overrides_may_follow_flags_and_verbose_may_follow_the_subcommand():
    args = parse_args(["train", "iterations=1", "--no-progress", "batch_size=4", "-v"])
    assert args.overrides == ["iterations=1", "batch_size=4"] and args.no_progress and args.verbose
    assert parse_args(["-v", "train"]).verbose and not parse_args(["train"]).verbose
    with pytest.raises(SystemExit):
        parse_args(["train", "--no-such-flag"])
    with pytest.raises(SystemExit):
        parse_args(["export", "run", "--out", "x", "iterations=1"])  # export takes no overrides


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        parse_args(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("seedcast ")


def test_an_interrupted_run_says_how_to_resume(tmp_path, capsys, monkeypatch):
    import seedcast.runs

    def interrupted(config, run_path, **options):
        run_path.mkdir(parents=True)
        (run_path / "updates.jsonl").write_text("")
        raise KeyboardInterrupt

    monkeypatch.setattr(seedcast.runs, "train", interrupted)
    assert main(["train", "--run-dir", str(tmp_path / "run"), "--no-progress"]) == 130
    assert f"seedcast train --resume {tmp_path / 'run'}" in capsys.readouterr().err


def test_model_copy_validates_like_any_config():
    config = seedcast.TrainConfig()
    with pytest.raises(ValueError, match="iterations"):
        config.model_copy(update={"iterations": -1})
    with pytest.raises(ValueError, match="unknown noise kind"):
        config.es.model_copy(update={"noise": "pink"})
    fleet = seedcast.FleetConfig(local=0, servers=["127.0.0.1:50051"])
    assert config.model_copy(update={"fleet": fleet}).fleet.servers == ["127.0.0.1:50051"]


def test_a_port_a_stopped_server_just_left_is_free_again():
    from seedcast.inference_server.server import _check_port_free

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server side closes first: its end of the connection waits in TIME_WAIT
    listener.close()
    client.close()
    _check_port_free("127.0.0.1", port, "gRPC", "--port")  # a restarted server may bind it (the chaos soak does)
