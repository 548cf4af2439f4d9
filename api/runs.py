"""Training, export and evaluation from Python: what `seedcast train`, `grpo`, `export` and `eval` do,
without a command line. The CLI calls these."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from seedcast.optimizer.analysis.evaluate import EvalOptions
from seedcast.optimizer.config import TrainConfig, load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.run_records import RunSummary
from seedcast.optimizer.trackers import check_installed
from seedcast.optimizer.trainer import TrainResult

log = logging.getLogger("seedcast")


def _config(config: TrainConfig | str | Path | None, overrides: list[str] | None) -> TrainConfig:
    """A TrainConfig as given, or loaded from a YAML path (or the defaults), with `key=value` overrides."""
    if isinstance(config, TrainConfig):
        return load_config(overrides=overrides, base=config.model_dump()) if overrides else config
    return load_config(config, overrides or [])


def new_run_dir(run_dir: str | Path | None) -> Path:
    """The run directory to create: as given, else runs/<date-time>."""
    return Path(run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")


def train(
    config: TrainConfig | str | Path | None = None,
    run_dir: str | Path | None = None,
    *,
    overrides: list[str] | None = None,
    show_progress: bool = False,
    registry=None,
) -> TrainResult:
    """Run ES into a new run directory: on local servers it starts (`fleet.local`) or on `fleet.servers`.

    `config` is a TrainConfig, a YAML path or None (the defaults: the bundled model on the arithmetic task);
    `overrides` are `key=value` strings as on the command line. Returns the final fingerprint and metrics.
    """
    from seedcast.optimizer.trainer import Trainer

    resolved = _config(config, overrides)
    check_installed(resolved.report_to)  # before the run directory exists
    run = RunDirectory.create(new_run_dir(run_dir), resolved)
    log.info("run directory: %s", run.path)
    return asyncio.run(Trainer(resolved, run, show_progress=show_progress, registry=registry).train())


def resume(
    run_dir: str | Path, *, overrides: list[str] | None = None, show_progress: bool = False, registry=None
) -> TrainResult:
    """Continue a run from its update log (e.g. `overrides=["iterations=20"]` to train further)."""
    from seedcast.optimizer.trainer import Trainer

    run = RunDirectory(run_dir)
    config = run.load_config(overrides or [])
    log.info("run directory: %s", run.path)
    return asyncio.run(Trainer(config, run, show_progress=show_progress, registry=registry).train())


def grpo(
    config: TrainConfig | str | Path | None = None,
    run_dir: str | Path | None = None,
    *,
    overrides: list[str] | None = None,
    show_progress: bool = False,
) -> RunSummary:
    """The GRPO baseline (TRL) on the same task, prompts and eval set as ES; needs `seedcast[grpo]`."""
    from seedcast.optimizer.analysis.grpo import train_grpo

    resolved = _config(config, overrides)
    check_installed(resolved.report_to)  # before the run directory exists and the model loads
    run = RunDirectory.create(new_run_dir(run_dir), resolved, update_log=False)
    log.info("run directory: %s", run.path)
    return train_grpo(resolved, run, show_progress=show_progress)


def export(
    run_dir: str | Path,
    out: str | Path,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    steps: int | None = None,
    show_progress: bool = False,
) -> dict:
    """Replay a run's update log onto its base model and write a Hugging Face folder with a model card;
    returns seedcast_export.json's content (`matches_servers` says whether the weights are the servers')."""
    from seedcast.optimizer.export import export_run

    return export_run(run_dir, out, device=device, dtype=dtype, steps=steps, show_progress=show_progress)


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
) -> dict:
    """pass@k (with 95% intervals), token entropy, distinct answers and truncation of `model` (a model spec,
    model folder or run directory) on `task`, sampled at T = 1 on local servers; writes OUT/results.json."""
    from seedcast.optimizer.analysis.evaluate import eval_config, run_eval
    from seedcast.optimizer.run_kinds import model_folder

    spec = str(model)
    if Path(spec).is_dir():
        spec = str(Path(model_folder(spec, export_to=Path(out) / "model")).resolve())
    config = eval_config(spec, task, limit=limit, seed=seed, overrides=overrides)
    options = EvalOptions(n=n, ks=sorted(k for k in ks if k <= n), max_tokens=max_tokens, seed=seed)
    return asyncio.run(run_eval(config, options, Path(out)))
