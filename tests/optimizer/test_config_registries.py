"""Every enumeration a config accepts comes from its registry: a new entry is accepted without editing a config,
and the error for an unknown name lists the registry's entries."""

from __future__ import annotations

import pytest

from seedcast.inference_server.backends import BACKENDS
from seedcast.inference_server.backends.dtype_names import DTYPE_NAMES
from seedcast.inference_server.noise.kinds import LOWRANK_TARGETS, NOISE_KINDS, ROUNDINGS
from seedcast.inference_server.serve_config import ServeConfigError, load_serve_config
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import config_reference, load_config
from seedcast.optimizer.es.fitness import FITNESS_MODES
from seedcast.optimizer.es.shaping import SHAPINGS
from seedcast.optimizer.es.strategies import STRATEGIES
from seedcast.optimizer.tracker_names import TRACKERS

TRAIN_SETTINGS = [
    ("model.backend", BACKENDS),
    ("model.dtype", DTYPE_NAMES),
    ("es.strategy", STRATEGIES),
    ("es.shaping", SHAPINGS),
    ("es.noise", NOISE_KINDS),
    ("es.fitness", FITNESS_MODES),
    ("es.rounding", ROUNDINGS),
]
SERVE_SETTINGS = [
    ("backend", BACKENDS),
    ("dtype", DTYPE_NAMES),
    ("noise", NOISE_KINDS),
    ("lowrank_targets", LOWRANK_TARGETS),
]


@pytest.mark.parametrize(("key", "registry"), TRAIN_SETTINGS)
def test_a_new_registry_entry_is_accepted_by_the_run_config(monkeypatch, key, registry):
    with pytest.raises(ConfigError, match=f"{key}: unknown .*'newcomer'; choose one of"):
        load_config(overrides=[f"{key}=newcomer"])
    monkeypatch.setitem(registry, "newcomer", object())
    section, name = key.split(".")
    assert getattr(getattr(load_config(overrides=[f"{key}=newcomer"]), section), name) == "newcomer"
    assert any(line.startswith(f"{key} = ") and "newcomer" in line for line in config_reference())


@pytest.mark.parametrize(("key", "registry"), SERVE_SETTINGS)
def test_a_new_registry_entry_is_accepted_by_the_server_config(monkeypatch, key, registry):
    with pytest.raises(ServeConfigError, match="unknown .*'newcomer'"):
        load_serve_config(values={key: "newcomer"})
    monkeypatch.setitem(registry, "newcomer", object())
    assert getattr(load_serve_config(values={key: "newcomer"}), key) == "newcomer"


def test_a_new_tracker_is_accepted_by_report_to(monkeypatch):
    with pytest.raises(ConfigError, match="unknown tracker 'newcomer'"):
        load_config(overrides=["report_to=newcomer"])
    monkeypatch.setitem(TRACKERS, "newcomer", "pip install newcomer")
    assert load_config(overrides=["report_to=tensorboard,newcomer"]).report_to == ["tensorboard", "newcomer"]


def test_every_problem_names_its_registry_at_once():
    with pytest.raises(ConfigError) as raised:
        load_config(overrides=[f"{key}=nothing" for key, _ in TRAIN_SETTINGS])
    message = str(raised.value)
    assert f"{len(TRAIN_SETTINGS)} configuration problem(s)" in message
    for key, registry in TRAIN_SETTINGS:
        assert f"{key}: unknown" in message and ", ".join(registry) in message


def test_a_new_generated_task_is_one_generator_and_one_task_line(monkeypatch):
    from seedcast.evaluators.base import Problem
    from seedcast.evaluators.datasets import load_problems
    from seedcast.evaluators.generator import Generator
    from seedcast.evaluators.tasks import GENERATED, TASKS, Task

    def doubling(count: int, level: int, seed: int) -> list[Problem]:
        return [Problem(prompt=f"Double {i + seed}.", reference=str(2 * (i + seed) * level)) for i in range(count)]

    generator = Generator(problems=doubling, levels={1: None, 2: None}, level_setting="synthetic_difficulty")
    monkeypatch.setitem(TASKS, "doubling", Task("synthetic", source=GENERATED, generator=generator))
    config = load_config(overrides=["task.dataset=doubling", "task.synthetic_size=3", "task.synthetic_difficulty=2"])
    problems = load_problems(config.task.dataset_spec(seed=5))
    assert [p.reference for p in problems] == ["20", "24", "28"]
    with pytest.raises(ConfigError, match=r"task.synthetic_difficulty: set one of \[1, 2\]"):
        load_config(overrides=["task.dataset=doubling", "task.synthetic_difficulty=3"])
