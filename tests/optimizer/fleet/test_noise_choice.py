"""`es.noise=auto` (the default): the fastest kind for the fleet, chosen at start and written into the run."""

from __future__ import annotations

import pytest
import yaml

from seedcast.cli import main
from seedcast.inference_server.noise.kinds import resolve_kind
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.fleet.noise_choice import NoiseMismatchError, choose_noise
from seedcast.optimizer.run_dir import RunDirectory
from tests.optimizer.test_end_to_end import _overrides


def _config(*overrides: str):
    return load_config(overrides=list(overrides))


def test_a_set_kind_is_kept_whatever_the_servers_or_device():
    assert choose_noise(_config("es.noise=gaussian"), {}) == "gaussian"
    assert choose_noise(_config("es.noise=gaussian", "model.device=cpu"), {}) == "gaussian"


def test_auto_with_local_servers_only_follows_their_device():
    assert choose_noise(_config("model.device=cpu"), {}) == "table"
    assert choose_noise(_config("model.device=cuda"), {}) == "gaussian"  # until the GPU check measures table


def test_auto_adopts_the_given_servers_kind_and_needs_them_to_agree():
    assert choose_noise(_config("model.device=cpu"), {"a:1": "gaussian", "b:2": "gaussian"}) == "gaussian"
    assert choose_noise(_config("model.device=cuda"), {"a:1": "table"}) == "table"
    assert choose_noise(_config(), {"old:1": ""}) == "gaussian"  # a server from before the field
    with pytest.raises(NoiseMismatchError, match=r"a:1 draws gaussian, b:2 draws table"):
        choose_noise(_config(), {"a:1": "gaussian", "b:2": "table"})


def test_a_noise_kind_this_optimizer_does_not_know_is_refused_not_written_into_the_run():
    with pytest.raises(NoiseMismatchError, match=r"b:2 reports 'x{40}'; known: gaussian, table"):
        choose_noise(_config(), {"a:1": "table", "b:2": "x" * 10_000})


def test_servers_resolve_auto_from_their_own_device():
    assert resolve_kind("auto", "cpu") == "table" and resolve_kind("auto", "cuda") == "gaussian"
    assert resolve_kind("gaussian", "cpu") == "gaussian"
    with pytest.raises(ValueError, match="auto, gaussian, table"):
        resolve_kind("pink", "cpu")


def test_the_resolved_kind_is_written_only_before_the_first_step(tmp_path):
    run = RunDirectory.create(tmp_path / "run", _config())
    run.record_resolved_config(_config("es.noise=table"))
    assert yaml.safe_load((run.path / "config.yaml").read_text())["es"]["noise"] == "table"
    run.append_update(ESStep(step=1, sigma=0.01, terms=[(1, 0.5)]))
    with pytest.raises(ConfigError, match="already has steps"):
        run.record_resolved_config(_config("es.noise=gaussian"))
    assert run.load_config().es.noise == "table"


def test_a_default_run_on_cpu_servers_records_table_noise_and_resumes_with_it(tmp_path, tiny_model_dir):
    run_dir = tmp_path / "run"
    overrides = [o for o in _overrides(tiny_model_dir, **{"fleet.local": 1}) if not o.startswith("es.noise")]
    assert main(["train", "--run-dir", str(run_dir), "--no-progress", *overrides]) == 0
    assert RunDirectory(run_dir).load_config().es.noise == "table"
    assert "table noise" in (run_dir / "logs" / "server-0.log").read_text()
    assert main(["train", "--resume", str(run_dir), "--no-progress", "iterations=3"]) == 0
    assert len(RunDirectory(run_dir).updates()) == 3
