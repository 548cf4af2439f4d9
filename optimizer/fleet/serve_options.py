"""What every server a run starts is told, whichever launcher starts it (local processes or Ray actors): the
run's model, noise, low-rank targets, member batching and the one evaluator spec it may load."""

from __future__ import annotations

from typing import Any

from seedcast.inference_server.serve_config import ServeConfig
from seedcast.optimizer.config import ConfigError, TrainConfig


def batching_options(config: TrainConfig) -> dict[str, int]:
    """What a vllm server needs to batch the run's members (fleet.members_per_batch): one LoRA slot per member of
    a group, of the run's rank. hf servers batch without options."""
    fleet, es = config.fleet, config.es
    if config.model.backend != "vllm" or fleet.members_per_batch < 2:
        return {}
    return {"batch_members": fleet.members_per_batch, "batch_max_rank": es.perturbation_rank}


def parallel_options(config: TrainConfig) -> dict[str, int]:
    """A vllm server's tensor and pipeline parallel sizes (model.*; hf servers take none)."""
    model = config.model
    if model.backend != "vllm":
        return {}
    return {"tensor_parallel_size": model.tensor_parallel_size, "pipeline_parallel_size": model.pipeline_parallel_size}


def run_serve_config(config: TrainConfig, noise: str, **placement: Any) -> ServeConfig:
    """The options of a server this run starts: the run's backend, model, dtype, noise kind, low-rank targets,
    pair cache and member batching, accepting exactly the evaluator this run scores with; `placement` adds where
    it runs (host, port, device, threads, ...), which the launcher decides."""
    model, fleet = config.model, config.fleet
    return ServeConfig(
        backend=model.backend,
        model=model.name,
        dtype=model.dtype,
        noise=noise,
        lowrank_targets=config.es.lowrank_targets,
        pair_cache=fleet.pair_cache,
        **batching_options(config),
        **parallel_options(config),
        allowed_evaluators=[config.task.evaluator_spec()],
        **{"device": model.device, **placement},
    )


def refuse_in_process_evaluator(config: TrainConfig, launched_as: str) -> None:
    """A ConfigError when the run's evaluator was registered in this process (seedcast.register_evaluator): servers
    started as `launched_as` run in other processes and cannot see it."""
    from seedcast.evaluators.registry import registered_in_process

    spec = config.task.evaluator_spec()
    if registered_in_process(spec):
        raise ConfigError(
            f"task.evaluator {spec!r} was registered in this process (seedcast.register_evaluator), which "
            f"fleet.local servers, {launched_as}, cannot see: serve from this process with seedcast.LocalServer "
            "and set fleet.servers=[server.address] (fleet.local=0), or name the function as module:callable"
        )
