"""Training, export and evaluation from Python: what `seedcast train`, `grpo`, `export` and `eval` do,
without a command line. The CLI's commands (commands.py) call these and only add printing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from seedcast.dataset_arguments import DATASET_FILE, dataset_settings
from seedcast.evaluators.base import Problem
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.config_files import load_config, merge_settings
from seedcast.optimizer.preflight import preflight
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.run_records import RunSummary
from seedcast.optimizer.trainer import TrainResult
from seedcast.reward_functions import RewardFunction, reward_specs
from seedcast.studies.evaluate import EvalOptions

log = logging.getLogger("seedcast")


def _config(
    config: TrainConfig | str | Path | None, overrides: list[str] | None, init_from: str | Path | None, run_dir: Path
) -> TrainConfig:
    """A TrainConfig as given, or loaded from a YAML path (or the defaults), with `key=value` overrides; with
    `init_from` (an ES run, exported into RUN_DIR/init-model, a GRPO run or a model folder) model.name is set to
    those weights."""
    overrides = list(overrides or [])
    if init_from is not None:
        from seedcast.optimizer.run_kinds import INIT_MODEL_DIR, model_folder

        folder = model_folder(init_from, export_to=run_dir / INIT_MODEL_DIR)
        log.info("starting from the weights of %s (%s)", init_from, folder)
        overrides.append(f"model.name={Path(folder).resolve()}")
    if isinstance(config, TrainConfig):
        return load_config(overrides=overrides, base=config.model_dump()) if overrides else config
    return load_config(config, overrides)


def new_run_dir(run_dir: str | Path | None) -> Path:
    """The run directory to create: as given, else runs/<date-time>."""
    return Path(run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")


def _metrics_registry(config: TrainConfig, registry: CollectorRegistry | None) -> CollectorRegistry | None:
    """The caller's registry; else, when the config sets metrics_port, a new one served on that port."""
    if registry is not None or config.metrics_port is None:
        return registry
    from seedcast.proto.telemetry import start_metrics_server

    registry = CollectorRegistry()  # one per run: a process may train more than once
    bound = start_metrics_server(config.metrics_port, registry=registry, setting="metrics_port (--metrics-port)")
    log.info("metrics on http://0.0.0.0:%d/metrics", bound)
    return registry


def _run_trainer(
    config: TrainConfig, run: RunDirectory, show_progress: bool, registry, problems: list[Problem]
) -> TrainResult:
    from seedcast.optimizer.trainer import Trainer

    log.info("run directory: %s", run.path)
    trainer = Trainer(config, run, show_progress=show_progress, registry=registry, problems=problems)
    result = asyncio.run(trainer.train())
    result.reward_curve = _reward_curve(run.path)
    return result


def _reward_curve(run_dir: Path) -> str:
    """Draw RUN_DIR/reward_curve.png, as the CLI does; its path, or why it was not drawn."""
    from seedcast.studies.plots import reward_curve_after_run

    return reward_curve_after_run(run_dir)


def train(
    config: TrainConfig | str | Path | None = None,
    run_dir: str | Path | None = None,
    *,
    model: str | Path | None = None,
    dataset: Any = None,
    reward_funcs: RewardFunction | Sequence[RewardFunction] | None = None,
    reward_weights: Sequence[float] | None = None,
    overrides: list[str] | None = None,
    init_from: str | Path | None = None,
    show_progress: bool = True,
    registry: CollectorRegistry | None = None,
) -> TrainResult:
    """Run ES into a new run directory: on local servers it starts (`fleet.local`) or on `fleet.servers`.

    `config` is a TrainConfig, a YAML path or None (the defaults: the bundled model on the arithmetic task);
    `overrides` are `key=value` strings as on the command line; `init_from` starts from another run's weights.
    As TRL's trainers do, it also takes `model` (a model spec or folder), `dataset` (a `datasets.Dataset`, a
    list of dicts with a `prompt` field, or a data file) and `reward_funcs` (functions `f(prompts, completions,
    **columns) -> list[float]` of any scale, or `module:function` strings) with `reward_weights`; they win over
    `config`, and functions the servers cannot import are served to them from this process for the run.
    The optimizer's metrics are served on `metrics_port` when the config sets it (into `registry` if given).
    As the CLI does, it shows progress bars (`show_progress=False` turns them off) and draws
    RUN_DIR/reward_curve.png. Returns the final fingerprint, the metrics and the reward curve's path.
    """
    path = new_run_dir(run_dir)
    resolved = _config(config, overrides, init_from, path)
    functions = [reward_funcs] if callable(reward_funcs) or isinstance(reward_funcs, str) else reward_funcs
    specs, server = reward_specs(list(functions or []))
    existed = path.exists()
    try:
        resolved = _with_trl_arguments(resolved, path, model, dataset, specs, reward_weights)
        problems = preflight(resolved)  # before the run directory exists and any server loads
        registry = _metrics_registry(resolved, registry)  # a taken metrics port, too
        run = RunDirectory.create(path, resolved)
    except BaseException:
        _remove_written_dataset(path, existed)  # a refused run leaves nothing behind
        if server is not None:
            server.close()
        raise
    try:
        return _run_trainer(resolved, run, show_progress, registry, problems)
    finally:
        if server is not None:
            server.close()


def _remove_written_dataset(path: Path, existed: bool) -> None:
    (path / DATASET_FILE).unlink(missing_ok=True)
    if not existed and path.is_dir() and not any(path.iterdir()):
        path.rmdir()


def _with_trl_arguments(
    config: TrainConfig,
    run_dir: Path,
    model: str | Path | None,
    dataset: Any,
    reward_specs: list[str],
    reward_weights: Sequence[float] | None,
) -> TrainConfig:
    """`config` with train()'s TRL-style arguments applied (validated together, every problem at once)."""
    patch: dict[str, Any] = {}
    if model is not None:
        patch["model"] = {"name": str(model)}
    task: dict[str, Any] = {}
    if dataset is not None:
        task.update(dataset_settings(dataset, run_dir, config.task.prompt_field))
    if reward_specs:
        task.update(reward_funcs=reward_specs, reward_weights=list(reward_weights) if reward_weights else None)
        task["evaluator"] = None
    elif reward_weights is not None:
        task["reward_weights"] = list(reward_weights)
    if task:
        patch["task"] = task
    return load_config(base=merge_settings(config.model_dump(), patch)) if patch else config


def resume(
    run_dir: str | Path,
    *,
    overrides: list[str] | None = None,
    show_progress: bool = True,
    registry: CollectorRegistry | None = None,
) -> TrainResult:
    """Continue a run from its update log (e.g. `overrides=["iterations=20"]` to train further)."""
    run = RunDirectory(run_dir)
    config = run.load_config(overrides or [])
    problems = preflight(config)
    return _run_trainer(config, run, show_progress, _metrics_registry(config, registry), problems)


def grpo(
    config: TrainConfig | str | Path | None = None,
    run_dir: str | Path | None = None,
    *,
    overrides: list[str] | None = None,
    init_from: str | Path | None = None,
    show_progress: bool = True,
) -> RunSummary:
    """The GRPO baseline (TRL) on the same task, prompts and eval set as ES; needs `seedcast[grpo]`."""
    from seedcast.studies.grpo import train_grpo

    path = new_run_dir(run_dir)
    resolved = _config(config, overrides, init_from, path)
    preflight(resolved, model_is_local=True)  # before the run directory exists and the model loads here
    run = RunDirectory.create(path, resolved, update_log=False)
    log.info("run directory: %s", run.path)
    summary = train_grpo(resolved, run, show_progress=show_progress)
    _reward_curve(run.path)  # RUN_DIR/reward_curve.png, as for ES
    return summary


def export(
    run_dir: str | Path,
    out: str | Path,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    steps: int | None = None,
    show_progress: bool = True,
    push_to_hub: str | None = None,
    private: bool = False,
) -> dict:
    """Replay a run's update log onto its base model and write a Hugging Face folder with a model card and the
    run's config and update log; with `push_to_hub="owner/name"` also upload it (a private repository with
    `private`). Returns seedcast_export.json's content (`matches_servers` says whether the weights are the
    servers'; `pushed_to` the commit URL)."""
    from seedcast.optimizer.export import export_run

    return export_run(
        run_dir,
        out,
        device=device,
        dtype=dtype,
        steps=steps,
        show_progress=show_progress,
        push_to_hub=push_to_hub,
        private=private,
    )


def evaluate(
    model: str | Path,
    out: str | Path,
    *,
    task: str = "synthetic",
    n: int = 16,
    ks: tuple[int, ...] = (1, 2, 4, 8, 16),
    max_tokens: int = 256,
    limit: int | None = None,
    seed: int = 0,
    overrides: list[str] | None = None,
    data: str | None = None,
    evaluator: str | None = None,
    servers: str | None = None,
    local: int | None = None,
    options: EvalOptions | None = None,
    sample_until: float | None = None,
) -> dict:
    """pass@k (with 95% intervals), token entropy, distinct answers and truncation of `model` (a model spec,
    model folder or run directory) on `task`, sampled at T = 1 on local servers (or `servers`, host:port,...);
    writes OUT/results.json. `options` replaces n, ks, max_tokens and seed with every sampling option. With
    `sample_until` (a timestamp) it starts no Sample call that would not end by then, and raises
    `EvaluationPaused` if calls are left: the same call later resumes them."""
    from seedcast.optimizer.run_kinds import model_folder
    from seedcast.studies.evaluate import eval_config, run_eval

    spec = str(model)
    if Path(spec).is_dir():  # a run directory evaluates its trained weights (an ES run is exported first)
        spec = str(Path(model_folder(spec, export_to=Path(out) / "model")).resolve())
    if options is None:
        options = EvalOptions(n=n, ks=sorted(k for k in ks if k <= n), max_tokens=max_tokens, seed=seed)
    config = eval_config(
        spec,
        task,
        data=data,
        evaluator=evaluator,
        limit=limit,
        seed=options.seed,
        servers=servers,
        local=local,
        overrides=overrides,
    )
    return asyncio.run(run_eval(config, options, Path(out), sample_until))
