"""Which servers a run's fleet section names, and whether a server serves the run's model: what both the fleet
and the check before a run's first step (remote_check.py) ask."""

from __future__ import annotations

import logging
from pathlib import Path

from seedcast.inference_server.noise.kinds import ALL_TARGETS
from seedcast.optimizer.config import FleetConfig, TrainConfig
from seedcast.proto.transport import plaintext_allowed, split_address

log = logging.getLogger("seedcast.fleet")


def listed_servers(fleet: FleetConfig) -> list[str]:
    """The addresses in fleet.servers_file (one host:port a line; blank lines and # comments skipped); lines that
    are no address, or plaintext off loopback without fleet.insecure, are skipped with a warning."""
    path = fleet.servers_file
    if not path:
        return []
    try:
        lines = Path(path).expanduser().read_text().splitlines()
    except OSError as error:
        log.warning("cannot read fleet.servers_file %s (%s); keeping the known servers", path, error.strerror)
        return []
    valid = []
    for address in filter(None, (line.split("#", 1)[0].strip() for line in lines)):
        try:
            host, _ = split_address(address)
        except ValueError:
            log.warning("fleet.servers_file: ignoring %r, not host:port", address)
            continue
        if not (fleet.tls_ca or plaintext_allowed(host, fleet.insecure)):
            log.warning(
                "fleet.servers_file: ignoring %s: plaintext off loopback needs fleet.insecure=true "
                "(or set fleet.tls_ca)",
                address,
            )
        else:
            valid.append(address)
    return valid


def run_targets(config: TrainConfig) -> str | None:
    """The run's es.lowrank_targets when its members are low rank; None for full-rank runs."""
    return config.es.lowrank_targets if config.es.perturbation_rank else None


def targets_mismatch(address: str, served: str, run_targets: str | None) -> str | None:
    """Why the server at `address`, whose low-rank members perturb `served` ("" from older servers: all), cannot
    serve a low-rank run of `run_targets` (None: the run is not low rank, so any server can)."""
    served = served or ALL_TARGETS
    if run_targets is None or served == run_targets:
        return None
    return (
        f"server {address} perturbs {served!r} tensors of low-rank members, but this run's es.lowrank_targets is "
        f"{run_targets!r}; restart it with `seedcast serve --lowrank-targets {run_targets}`"
    )


def model_mismatch(address: str, served: str, run_model: str | None) -> str | None:
    """Why the server at `address`, which loaded `served`, cannot serve a run of `run_model` (None: it can, or the
    run does not say)."""
    if run_model is None or served == run_model:
        return None
    return (
        f"server {address} serves the model {served[:200]!r}, but this run's model.name is {run_model!r}; start it "
        f"with `seedcast serve --model {run_model}`, or set model.name to its model"
    )
