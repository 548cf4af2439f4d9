"""`--config NAME` finds the shipped configs from any folder; a real file of that name wins; a wrong name lists
the shipped ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.shipped_configs import config_path, shipped_config_names

REPO = Path(__file__).resolve().parents[2]


def test_every_config_in_the_repository_is_shipped():
    assert shipped_config_names() == sorted(path.stem for path in (REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("spec", ["synthetic-cpu", "synthetic-cpu.yaml", "configs/synthetic-cpu.yaml"])
def test_a_shipped_config_loads_by_name_from_another_folder(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert config_path(spec).read_bytes() == (REPO / "configs" / "synthetic-cpu.yaml").read_bytes()
    assert load_config(spec).task.dataset == "synthetic"


def test_a_file_in_the_working_folder_wins_over_the_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("synthetic-cpu.yaml").write_text("iterations: 3\n")
    assert load_config("synthetic-cpu.yaml").iterations == 3


def test_an_unknown_name_lists_the_shipped_configs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="does not exist.*gsm8k-cpu.*synthetic-cpu"):
        load_config("synthetic")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("elsewhere/synthetic-cpu.yaml")  # a folder of its own is a path, not a name
