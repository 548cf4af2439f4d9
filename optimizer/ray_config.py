"""The `fleet.ray` section: how `fleet.launcher=ray` starts the run's servers as Ray actors."""

from __future__ import annotations

import importlib.util
from typing import Annotated, Literal

from pydantic import Field

from seedcast.optimizer.config_section import Section
from seedcast.proto.choices import one_of

# fleet.ray.placement: each name and the Ray scheduling strategy it asks for.
PLACEMENTS = {"spread": "SPREAD", "pack": "DEFAULT"}
RAY_INSTALL_HINT = "install it with `pip install 'seedcast[ray]'`"


def ray_installed() -> bool:
    """Whether `import ray` would work here (checked when a config asks for the Ray launcher, not imported)."""
    return importlib.util.find_spec("ray") is not None


class RayConfig(Section):
    """Servers as Ray actors (fleet.launcher=ray): fleet.local of them, one GPU each where the cluster has GPUs,
    spread over its nodes. Ray restarts an actor that dies; its server rejoins by Sync at the next iteration."""

    address: str | None = Field(
        None,
        description="Passed to ray.init: auto or HOST:PORT joins a running cluster (ray start --head), ray://HOST:PORT "
        "through Ray Client; null: Ray's own default (RAY_ADDRESS, else a cluster started on this machine, else a new "
        "Ray instance in this process, stopped at the end).",
    )
    gpus_per_server: float | Literal["auto"] = Field(
        "auto",
        description="GPUs each server actor reserves (Ray sets its CUDA_VISIBLE_DEVICES; the server uses cuda); "
        "auto: 1 when the cluster has GPUs, else 0 (the server runs on model.device).",
    )
    cpus_per_server: float = Field(
        1.0, gt=0, description="CPUs each server actor reserves; its torch threads (unless fleet.threads_per_server)."
    )
    placement: Annotated[str, one_of(PLACEMENTS, "placement")] = Field(
        "spread",
        description="spread: the actors over as many nodes as possible (Ray's SPREAD); pack: Ray's default, "
        "filling a node before the next.",
    )
    host: str | None = Field(
        None,
        description="The address each server listens on and the fleet dials; null: the IP Ray knows its node by. "
        "127.0.0.1 for a cluster whose nodes all run on this machine.",
    )
    max_restarts: int = Field(
        3, ge=-1, description="How often Ray restarts a server actor that dies (-1: without limit; 0: never)."
    )
    namespace: str = Field(
        "seedcast", min_length=1, description="Ray namespace of the server actors (named RUN-server-I within it)."
    )


def ray_launcher_problems(fleet) -> list[str]:
    """What is wrong with a fleet section that sets launcher=ray (`fleet` is a FleetConfig), every problem at once."""
    from seedcast.proto.transport import plaintext_allowed

    problems = []
    if fleet.local < 1:
        problems.append("fleet.launcher=ray starts fleet.local servers as Ray actors: set fleet.local=N (N >= 1)")
    if fleet.local_devices is not None:
        problems.append(
            "fleet.local_devices places processes on this machine; with fleet.launcher=ray, Ray gives each server "
            "actor its GPUs (fleet.ray.gpus_per_server): leave fleet.local_devices out"
        )
    if not (fleet.insecure or (fleet.ray.host and plaintext_allowed(fleet.ray.host, False))):
        problems.append(
            "fleet.launcher=ray: the servers on the Ray cluster speak plaintext gRPC (each run with its own bearer "
            "token) on their node's address; set fleet.insecure=true on the cluster's private network, or "
            "fleet.ray.host=127.0.0.1 when every node of the cluster runs on this machine"
        )
    if not ray_installed():
        problems.append(f"fleet.launcher=ray needs Ray, which is not installed: {RAY_INSTALL_HINT}")
    return problems
