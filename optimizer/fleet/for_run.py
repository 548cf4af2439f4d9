"""The fleet of a run (training, or `seedcast eval`) from its config: the fleet section, the run's noise choice
and, with fleet.local, the servers the run starts (on this machine or on Ray). `Fleet` itself knows only its own
section."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.fleet.launcher import launcher_for_run
from seedcast.optimizer.fleet.noise_choice import choose_noise
from seedcast.optimizer.fleet.replicas import Fleet
from seedcast.optimizer.fleet.server_list import run_targets
from seedcast.optimizer.metrics import OptimizerMetrics


def fleet_for_run(config: TrainConfig, logs_path: Path, metrics: OptimizerMetrics) -> Fleet:
    """The run's fleet; its local servers (if any) write their logs under `logs_path`."""
    return Fleet(
        config.fleet,
        metrics,
        choose_noise=partial(choose_noise, config),
        launcher=launcher_for_run(config, logs_path),
        model=config.model.name,
        lowrank_targets=run_targets(config),
    )
