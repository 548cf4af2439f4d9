"""Experiment trackers (`report_to`): the per-step record of metrics.jsonl, written where users already
look. `tensorboard` writes event files under RUN_DIR/tensorboard (offline by nature); `wandb` logs to
Weights & Biases, online when credentials are configured and in offline mode otherwise (RUN_DIR/wandb,
uploadable later with `wandb sync`), so a run never needs an account or a network to start.

ES (`seedcast train`) and GRPO (`seedcast grpo`) log the same record under the same names, so both
methods land side by side in one dashboard; GRPO also hands `report_to` to TRL, whose own metrics then go
to the same TensorBoard folder or W&B run. `seedcast eval` logs its summary (pass@k, entropy...) at step 0.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from seedcast.optimizer.run_records import IterationRecord
from seedcast.optimizer.tracker_names import TRACKERS
from seedcast.proto.errors import SeedcastError

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


def record_scalars(record: IterationRecord) -> dict[str, float]:
    """The numeric fields of a metrics.jsonl row (the fingerprint, a string, stays in the file)."""
    return {
        key: float(value)
        for key, value in record.to_row().items()
        if isinstance(value, int | float) and not isinstance(value, bool) and key not in ("iteration", "step")
    }


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
        self.log(record.step, record_scalars(record))

    def log(self, step: int, scalars: dict[str, float]) -> None:
        for tracker in self.trackers:
            tracker.log(step, scalars)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def open_trackers(names: Sequence[str], run_dir: Path, config: dict[str, Any], project: str = "seedcast") -> Trackers:
    """The trackers `names` for the run in `run_dir` (none: an empty set that logs nothing)."""
    check_installed(names)
    trackers: list[Tracker] = []
    for name in names:
        if name == "tensorboard":
            trackers.append(TensorBoardTracker(run_dir / "tensorboard", config))
        else:
            trackers.append(WandbTracker(run_dir, config, run_dir.name, project))
    return Trackers(trackers)
