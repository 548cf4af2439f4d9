"""Config validation: every problem reported at once, with what to set; shipped configs validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedcast.optimizer.config import ConfigError, TrainConfig
from seedcast.optimizer.config_files import config_reference, load_config, parse_overrides

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def test_defaults_are_the_embedded_run():
    config = load_config()
    assert config.model.name == "smollm2-135m-instruct"
    assert config.task.dataset == "synthetic" and config.fleet.local == 1


def test_all_problems_reported_at_once():
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["es.sigma=0", "bogus_key=1", "es.population=7", "task.dataset=gsm8k", "fleet.local=0"])
    message = str(raised.value)
    assert "5 configuration problem(s)" in message
    for fragment in ("es.sigma", "bogus_key: unknown key", "even population", "task.path", "fleet.servers"):
        assert fragment in message


@pytest.mark.parametrize("sigma", ["-0.1", "0", ".nan", ".inf"])
def test_sigma_must_be_positive_and_finite(sigma):
    with pytest.raises(ConfigError, match="es.sigma"):
        load_config(overrides=[f"es.sigma={sigma}"])


def test_unknown_nested_key():
    with pytest.raises(ConfigError, match="es.sgima: unknown key"):
        load_config(overrides=["es.sgima=0.1"])


def test_overrides_parse_types():
    tree = parse_overrides(["es.sigma=0.002", "fleet.servers=[a:1,b:2]", "es.mirrored=false", "task.path=x.jsonl"])
    assert tree == {
        "es": {"sigma": 0.002, "mirrored": False},
        "fleet": {"servers": ["a:1", "b:2"]},
        "task": {"path": "x.jsonl"},
    }
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["novalue"])


def test_bad_server_address():
    with pytest.raises(ConfigError, match="host:port"):
        load_config(overrides=["fleet.servers=[localhost]"])


def test_yaml_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_reference_lists_every_key():
    keys = {line.split(" = ")[0] for line in config_reference()}
    assert {"es.sigma", "task.dataset", "fleet.servers", "iterations"} <= keys


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_configs_validate(path):
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# seedcast train --config"), "each config opens with the command that runs it"
    assert isinstance(load_config(path), TrainConfig)


def test_there_are_shipped_configs():
    assert len(CONFIGS) >= 2


def test_low_rank_members_carry_their_rank_and_full_rank_members_none():
    assert load_config().es.perturbation_rank == 0
    low = load_config(overrides=["es.perturbation=lowrank", "es.rank=4"])
    assert low.es.perturbation_rank == 4 and low.es.strategy_options()["rank"] == 4
    assert load_config(overrides=["es.perturbation=lowrank"]).es.perturbation_rank == 1


def test_a_rank_without_low_rank_members_and_an_unknown_perturbation_are_refused_together():
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["es.rank=4"])
    assert "es.rank applies to low-rank members only; set es.perturbation=lowrank" in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["es.perturbation=sparse", "es.rank=0"])
    message = str(raised.value)
    assert "es.perturbation" in message and "full, lowrank" in message and "es.rank" in message
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["es.lowrank_targets=linear"])
    assert "es.lowrank_targets applies to low-rank members only" in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=["es.perturbation=lowrank", "es.lowrank_targets=some"])
    assert "all, linear" in str(raised.value)
    linear = load_config(overrides=["es.perturbation=lowrank", "es.lowrank_targets=linear"])
    assert linear.es.lowrank_targets == "linear"


def test_every_sampling_setting_reaches_the_servers_sampling():
    from seedcast.inference_server.validation import Limits, sampling_from_proto

    config = load_config(
        overrides=[
            "sampling.temperature=0.7",
            "sampling.top_p=0.9",
            "sampling.top_k=40",
            "sampling.min_p=0.05",
            "sampling.repetition_penalty=1.2",
            'sampling.stop=[END, "\\n\\n"]',  # as typed on a command line: YAML's escapes
            "sampling.max_new_tokens=32",
            "sampling.samples_per_prompt=2",
        ]
    )
    served = sampling_from_proto(config.sampling.to_proto(), Limits())
    floats = ("temperature", "top_p", "min_p", "repetition_penalty")  # float32 on the wire
    assert [getattr(served, name) for name in floats] == pytest.approx([0.7, 0.9, 0.05, 1.2])
    assert (served.max_new_tokens, served.samples_per_prompt, served.top_k) == (32, 2, 40)
    assert served.stop == ("END", "\n\n")
    assert sampling_from_proto(config.sampling.to_proto(temperature=0.0), Limits()).temperature == 0.0
    assert sampling_from_proto(load_config().sampling.to_proto(), Limits()).filters() == {}  # all off by default
