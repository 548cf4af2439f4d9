"""What starts the servers a run owns (fleet.local of them): child processes on this machine (fleet.launcher=local,
local.py) or Ray actors (fleet.launcher=ray, ray_launcher.py). The fleet (replicas.py) sees only this interface."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.fleet.client import ClientSecurity


class Launcher(Protocol):
    """The servers one run starts, serves with and stops."""

    def start(self, noise: str | None = None) -> list[str]:
        """Start the servers drawing `noise` (the run's kind) and wait until they serve; their addresses."""

    def current_addresses(self) -> list[str]:
        """Where its live servers listen now (a server restarted by its launcher may have a new address)."""

    def client_security(self, remote: ClientSecurity) -> ClientSecurity:
        """How the fleet talks to these servers, given how it talks to remote ones."""

    def peak_rss_bytes(self) -> list[int]:
        """Peak resident memory of each server, where it can be read."""

    def stop(self) -> None:
        """Stop every server."""


def launcher_for_run(config: TrainConfig, logs_path: Path) -> Launcher | None:
    """The launcher of the run's fleet.local servers (None when it starts none); local servers log to `logs_path`."""
    if not config.fleet.local:
        return None
    if config.fleet.launcher == "ray":
        from seedcast.optimizer.fleet.ray_launcher import RayFleet

        return RayFleet(config, logs_path)
    from seedcast.optimizer.fleet.local import LocalFleet

    return LocalFleet(config, logs_path)
