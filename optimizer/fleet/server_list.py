"""Which servers a run's fleet section names, and whether a server serves the run's model: what both the fleet
and the check before a run's first step (remote_check.py) ask."""

from __future__ import annotations

import logging
from pathlib import Path

from seedcast.optimizer.config import FleetConfig
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


def model_mismatch(address: str, served: str, run_model: str | None) -> str | None:
    """Why the server at `address`, which loaded `served`, cannot serve a run of `run_model` (None: it can, or the
    run does not say)."""
    if run_model is None or served == run_model:
        return None
    return (
        f"server {address} serves the model {served[:200]!r}, but this run's model.name is {run_model!r}; start it "
        f"with `seedcast serve --model {run_model}`, or set model.name to its model"
    )
