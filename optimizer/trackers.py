"""Experiment trackers (`report_to`): the per-step record of metrics.jsonl, written where users already
look. `tensorboard` writes event files under RUN_DIR/tensorboard (offline by nature); `wandb` logs to
Weights & Biases, online when credentials are configured and in offline mode otherwise (RUN_DIR/wandb,
uploadable later with `wandb sync`), so a run never needs an account or a network to start.

ES (`seedcast train`) and GRPO (`seedcast grpo`) log the same record under the same names, TRL's
(`train/reward`, `eval/reward`...: tracked_scalars.py), so both methods land side by side in one dashboard;
GRPO also hands `report_to` to TRL, whose own metrics then go to the same TensorBoard folder or W&B run.
`seedcast eval` logs its summary (`eval/pass@k`, entropy...) at step 0. Each tracker gets the resolved config
(what the run records, e.g. `es.noise: table` where `auto` was written), under `project` and `run_name`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from seedcast.optimizer.run_records import IterationRecord
from seedcast.optimizer.tracked_scalars import tracked_scalars
from seedcast.optimizer.tracker_names import TRACKERS
from seedcast.proto.errors import SeedcastError

if TYPE_CHECKING:
    from seedcast.optimizer.config import TrainConfig

log = logging.getLogger("seedcast.trackers")


class TrackerUnavailableError(SeedcastError, ImportError):
    """A tracker named in report_to is not installed; the message says what to install."""


class Tracker(Protocol):
    """One destination for the per-step scalars."""

    def log(self, step: int, scalars: dict[str, float]) -> None: ...

    def close(self) -> None: ...


def check_installed(names: Sequence[str]) -> None:
    """Raise one error naming every tracker in `names` that is not installed, before a run starts."""
    missing = [n for n in names if importlib.util.find_spec(n) is None]  # each tracker's module has its name
    if missing:
        hints = "; ".join(f"{n}: {TRACKERS[n]}" for n in missing)
        raise TrackerUnavailableError(f"report_to names trackers that are not installed ({hints})")


class TensorBoardTracker:
    """Event files under `folder`, the run's config as text."""

    def __init__(self, folder: Path, config: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))
        import yaml

        self.writer.add_text("config", "```\n" + yaml.safe_dump(config, sort_keys=False) + "```", 0)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for key, value in scalars.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def wandb_mode() -> str:
    """WANDB_MODE when set; otherwise online only where credentials exist (an API key or a netrc entry)."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    has_netrc_key = netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="replace")
    return "online" if os.environ.get("WANDB_API_KEY") or has_netrc_key else "offline"


class WandbTracker:
    """A W&B run in `folder`, named after the run directory; offline without credentials."""

    def __init__(self, folder: Path, config: dict[str, Any], name: str, project: str) -> None:
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        mode = wandb_mode()
        self.run = wandb.init(project=project, name=name, dir=str(folder), config=config, mode=mode)
        if mode == "offline":
            log.info("W&B is offline (no credentials or WANDB_MODE=offline); upload later: wandb sync %s", folder)

    def log(self, step: int, scalars: dict[str, float]) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


class Trackers:
    """Every tracker a run reports to; `log_record` sends one metrics.jsonl row to all of them."""

    def __init__(self, trackers: list[Tracker]) -> None:
        self.trackers = trackers

    def log_record(self, record: IterationRecord) -> None:
        self.log(record.step, tracked_scalars(record))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for tracker in self.trackers:
            tracker.log(step, scalars)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def open_trackers(
    names: Sequence[str], run_dir: Path, config: dict[str, Any], project: str | None = None, run_name: str | None = None
) -> Trackers:
    """The trackers `names` for the run in `run_dir` (none: an empty set that logs nothing); W&B logs into
    `project` (default: $WANDB_PROJECT, else seedcast) as `run_name` (default: the run directory's name)."""
    check_installed(names)
    trackers: list[Tracker] = []
    for name in names:
        if name == "tensorboard":
            trackers.append(TensorBoardTracker(run_dir / "tensorboard", config))
        else:
            project = project or os.environ.get("WANDB_PROJECT") or "seedcast"
            trackers.append(WandbTracker(run_dir, config, run_name or run_dir.name, project))
    return Trackers(trackers)


def open_run_trackers(config: TrainConfig, run_dir: Path) -> Trackers:
    """`open_trackers` for a TrainConfig: its report_to, project and run_name, the config itself logged."""
    return open_trackers(config.report_to, run_dir, config.model_dump(mode="json"), config.project, config.run_name)
