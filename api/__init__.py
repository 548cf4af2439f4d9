"""Seedcast: post-train language models with evolution strategies across a fleet of inference servers.

The Python API is what the `seedcast` command runs:

    import seedcast

    config = seedcast.TrainConfig(iterations=5, es=seedcast.ESConfig(population=8))
    result = seedcast.train(config, "runs/api")                  # local servers, the bundled model
    seedcast.export("runs/api", "models/api", dtype="bfloat16")
    print(seedcast.evaluate("models/api", "evals/api", n=8, limit=32)["pass_at_k"])

Evaluators are plain functions `(completion, reference) -> float in [0, 1] | None` (None: this sample cannot
be scored) or objects with `score_batch`; servers load them by spec (`task.evaluator="my_module:reward"`),
so a function must live in an importable module. See docs/usage.md#python-api.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("seedcast")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "unknown (not installed)"

# Each public name and the module it lives in. They load on first use (PEP 562), so importing any part of
# Seedcast (the CLI, a server) does not pull in the whole API and its dependencies.
_EXPORTS = {
    "Evaluator": "seedcast.evaluators.base",
    "FunctionEvaluator": "seedcast.evaluators.base",
    "ScoredSample": "seedcast.evaluators.base",
    "load_evaluator": "seedcast.evaluators.registry",
    "register_evaluator": "seedcast.evaluators.registry",
    "ServeConfig": "seedcast.inference_server.serve_config",
    "ConfigError": "seedcast.optimizer.config",
    "ESConfig": "seedcast.optimizer.config",
    "FleetConfig": "seedcast.optimizer.config",
    "GRPOConfig": "seedcast.optimizer.config",
    "ModelConfig": "seedcast.optimizer.config",
    "SamplingConfig": "seedcast.optimizer.config",
    "TaskConfig": "seedcast.optimizer.config",
    "TrainConfig": "seedcast.optimizer.config",
    "load_config": "seedcast.optimizer.config_files",
    "RunDirectory": "seedcast.optimizer.run_dir",
    "IterationRecord": "seedcast.optimizer.run_records",
    "RunSummary": "seedcast.optimizer.run_records",
    "TrainResult": "seedcast.optimizer.trainer",
    "SeedcastError": "seedcast.proto.errors",
    "evaluate": "seedcast.runs",
    "export": "seedcast.runs",
    "grpo": "seedcast.runs",
    "resume": "seedcast.runs",
    "train": "seedcast.runs",
    "LocalServer": "seedcast.servers",
    "start_server_process": "seedcast.servers",
}
__all__ = [
    "ConfigError",
    "ESConfig",
    "Evaluator",
    "FleetConfig",
    "FunctionEvaluator",
    "GRPOConfig",
    "IterationRecord",
    "LocalServer",
    "ModelConfig",
    "RunDirectory",
    "RunSummary",
    "SamplingConfig",
    "ScoredSample",
    "SeedcastError",
    "ServeConfig",
    "TaskConfig",
    "TrainConfig",
    "TrainResult",
    "evaluate",
    "export",
    "grpo",
    "load_config",
    "load_evaluator",
    "register_evaluator",
    "resume",
    "start_server_process",
    "train",
]

if TYPE_CHECKING:
    from seedcast.evaluators.base import Evaluator, FunctionEvaluator, ScoredSample
    from seedcast.evaluators.registry import load_evaluator, register_evaluator
    from seedcast.inference_server.serve_config import ServeConfig
    from seedcast.optimizer.config import (
        ConfigError,
        ESConfig,
        FleetConfig,
        GRPOConfig,
        ModelConfig,
        SamplingConfig,
        TaskConfig,
        TrainConfig,
    )
    from seedcast.optimizer.config_files import load_config
    from seedcast.optimizer.run_dir import RunDirectory
    from seedcast.optimizer.run_records import IterationRecord, RunSummary
    from seedcast.optimizer.trainer import TrainResult
    from seedcast.proto.errors import SeedcastError
    from seedcast.runs import evaluate, export, grpo, resume, train
    from seedcast.servers import LocalServer, start_server_process


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seedcast' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
