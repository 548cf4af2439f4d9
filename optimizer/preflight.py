"""What a run can check in the optimizer before its run folder exists and before any server loads a model, so a
mistake ends in one line and exit status 2 with nothing half-made: the trackers, the data file, and, when every
server is one this process starts on this machine (their files are this machine's; a Ray cluster's nodes hold
their own), the model path and the evaluator spec; remote servers are asked whether they serve the run's model
and can build its evaluator (fleet/remote_check.py)."""

from __future__ import annotations

from seedcast.evaluators.base import Problem
from seedcast.evaluators.datasets import load_problems
from seedcast.evaluators.registry import check_evaluator_spec
from seedcast.inference_server.model_source import resolve_model
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.fleet.remote_check import check_remote_servers
from seedcast.optimizer.trackers import check_installed


def preflight(config: TrainConfig, model_is_local: bool | None = None) -> list[Problem]:
    """Raise the SeedcastError of the first problem found, else return the task's problems (the optimizer reads
    them itself: loaded here once, they are handed on). `model_is_local`: whether the model and evaluator live
    on this machine (default: when the fleet is local servers only, or for GRPO, which loads it here)."""
    check_installed(config.report_to)
    problems = load_problems(config.task.dataset_spec(config.seed))
    if model_is_local is None:  # Ray's nodes hold their own files, so a Ray fleet's are not checked here
        fleet = config.fleet
        model_is_local = not fleet.servers and not fleet.servers_file and fleet.launcher == "local"
    if model_is_local:
        resolve_model(config.model.name)
        check_evaluator_spec(config.task.evaluator_spec())
    else:
        check_remote_servers(config)
    return problems
