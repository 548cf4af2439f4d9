"""Start a run's servers as Ray actors (`fleet.launcher=ray`), find them again after Ray restarts them, tear them
down at the end.

Each of the fleet.local servers is one actor (inference_server/ray_actor.py) reserving fleet.ray.cpus_per_server
CPUs and gpus_per_server GPUs, placed by Ray (SPREAD over the nodes by default). The fleet talks to them over the
same gRPC contract as to any server, in plaintext with a bearer token of the run's own (fleet.token_file's, else a
fresh random one). An actor that dies is restarted by Ray (fleet.ray.max_restarts) with a fresh server on a new
port: `current_addresses` reports it, the fleet forgets the old address and readmits the new one by Sync.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.fleet.client import ClientSecurity
from seedcast.optimizer.fleet.serve_options import refuse_in_process_evaluator, run_serve_config
from seedcast.optimizer.ray_config import PLACEMENTS
from seedcast.proto.errors import SeedcastError
from seedcast.proto.transport import read_token, split_address

log = logging.getLogger("seedcast.fleet")
ADDRESS_WAIT_SECONDS = 0.5  # how long current_addresses waits for actors to say where they listen (live: ms)


class _MainThreadOnlyWarning(logging.Filter):
    """Drops Ray's warning that a driver started outside the main thread (the fleet starts it in a worker thread)
    installs no SIGTERM handler: the optimizer handles its own signals."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


class RayServerError(SeedcastError, RuntimeError):
    """A server actor could not be created, or failed while loading; the message holds its error."""


def refuse_unreachable(address: str | None, timeout_seconds: float = 5.0) -> None:
    """A RayServerError at once when fleet.ray.address names a HOST:PORT nothing listens on: ray.init would
    otherwise retry for minutes. `auto`, `ray://` addresses and None are left to ray.init."""
    if not address or address == "auto" or "://" in address:
        return
    try:
        host, port = split_address(address)
        with socket.create_connection((host.strip("[]"), port), timeout=timeout_seconds):
            pass
    except (ValueError, OSError) as error:
        raise RayServerError(
            f"no Ray cluster answers at fleet.ray.address={address!r} ({error}); start one there with "
            "`ray start --head --port PORT`, or leave fleet.ray.address unset for a Ray instance in this process"
        ) from None


def gpus_per_server(config: TrainConfig, cluster_resources: dict[str, float]) -> float:
    """fleet.ray.gpus_per_server, with auto resolved: when the cluster has GPUs and model.device is not cpu, the GPUs
    one server spans (1, or model.tensor_parallel_size × pipeline_parallel_size), else 0."""
    chosen = config.fleet.ray.gpus_per_server
    if chosen != "auto":
        return float(chosen)
    has_gpus = cluster_resources.get("GPU", 0) >= 1 and config.model.device != "cpu"
    return float(config.model.gpus_per_server) if has_gpus else 0.0


def actor_options(config: TrainConfig, name: str, gpus: float) -> dict[str, Any]:
    """What `ActorClass.options(...)` gets for server actor `name`."""
    ray_config = config.fleet.ray
    return {
        "name": name,
        "namespace": ray_config.namespace,
        "num_cpus": ray_config.cpus_per_server,
        "num_gpus": gpus,
        "max_restarts": ray_config.max_restarts,
        "max_task_retries": 0,
        "scheduling_strategy": PLACEMENTS[ray_config.placement],
    }


class RayFleet:
    """The fleet.local server actors of one run, on the Ray cluster fleet.ray.address names."""

    def __init__(self, config: TrainConfig, logs_dir: Path, noise: str | None = None) -> None:
        """`logs_dir` (RUN_DIR/logs) names the actors after the run; their logs are Ray's worker logs."""
        self.config = config
        self.noise = noise or config.es.noise
        self.actors: list[Any] = []
        self.addresses: list[str] = []
        self.placements: list[dict[str, Any]] = []
        self.token = read_token(config.fleet.token_file) or secrets.token_urlsafe(32)
        self._asked: dict[int, Any] = {}  # actor index -> its unanswered address() call
        self._down: set[int] = set()  # actors whose last answer was an error
        self._started_ray = False
        self._prefix = f"{logs_dir.parent.name or 'seedcast'}-{uuid.uuid4().hex[:8]}"

    def threads_per_server(self) -> int:
        """Torch threads for each server: fleet.threads_per_server, else the CPUs its actor reserves."""
        return self.config.fleet.threads_per_server or max(1, int(self.config.fleet.ray.cpus_per_server))

    def start(self, noise: str | None = None) -> list[str]:
        """Connect to Ray, create the actors and wait until every server serves; returns their addresses."""
        import ray

        from seedcast.inference_server.ray_actor import ServerActor

        self.noise = noise or self.noise
        refuse_in_process_evaluator(self.config, "Ray actors")
        fleet = self.config.fleet
        if not ray.is_initialized():
            logging.getLogger("ray._private.worker").addFilter(_MainThreadOnlyWarning())
            refuse_unreachable(fleet.ray.address)
            try:
                ray.init(address=fleet.ray.address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise RayServerError(
                    f"cannot connect to Ray at fleet.ray.address={fleet.ray.address!r}: {error}; start a cluster "
                    "with `ray start --head`, or leave fleet.ray.address unset for a Ray instance in this process"
                ) from None
            self._started_ray = True
        resources = ray.cluster_resources()
        gpus = gpus_per_server(self.config, resources)
        self._check_fits(resources, gpus)
        options = run_serve_config(self.config, self.noise, threads=self.threads_per_server()).model_dump(
            exclude={"host", "port", "token_file"}
        )
        actor_class = ray.remote(ServerActor)
        for index in range(fleet.local):
            actor_options_now = actor_options(self.config, f"{self._prefix}-server-{index}", gpus)
            actor = actor_class.options(**actor_options_now).remote(options, self.token, fleet.ray.host, gpus > 0)
            self.actors.append(actor)
        log.info(
            "starting %d server actor(s) on Ray (%g CPU, %g GPU each, %s)",
            fleet.local,
            fleet.ray.cpus_per_server,
            gpus,
            fleet.ray.placement,
        )
        self.placements = self._wait_placed(fleet.start_timeout_seconds)
        self.addresses = [placement["address"] for placement in self.placements]
        for index, placement in enumerate(self.placements):
            log.info(
                "server %d: %s on Ray node %s (pid %d, %s)",
                index,
                placement["address"],
                placement["node_id"][:12],
                placement["pid"],
                placement["device"] if not placement["gpu_ids"] else f"GPU {','.join(placement['gpu_ids'])}",
            )
        return self.addresses

    def _check_fits(self, resources: dict[str, float], gpus: float) -> None:
        """A RayServerError, before any actor is made, when the whole cluster has fewer CPUs or GPUs than one server
        actor reserves: Ray would otherwise leave it pending until fleet.start_timeout_seconds. (A cluster with
        enough in total but too little on every node still waits out that timeout.)"""
        cpus = self.config.fleet.ray.cpus_per_server
        if cpus > resources.get("CPU", 0) or gpus > resources.get("GPU", 0):
            self.stop()
            raise RayServerError(
                f"each server actor reserves {cpus:g} CPU and {gpus:g} GPU, but the whole Ray cluster has "
                f"{resources.get('CPU', 0):g} CPU and {resources.get('GPU', 0):g} GPU; lower fleet.ray.cpus_per_server "
                "or fleet.ray.gpus_per_server, or add nodes"
            )

    def _wait_placed(self, timeout_seconds: float) -> list[dict[str, Any]]:
        """Every actor's placement once its server serves; stops the actors and raises if one fails or is late."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        pending = [actor.placement.remote() for actor in self.actors]
        deadline = time.monotonic() + timeout_seconds
        try:
            return ray.get(pending, timeout=max(0.0, deadline - time.monotonic()))
        except GetTimeoutError:
            self.stop()
            raise RayServerError(
                f"the server actors did not all serve within {timeout_seconds:g} s (fleet.start_timeout_seconds); "
                "check that the cluster has the CPUs and GPUs they reserve (`ray status`)"
            ) from None
        except (RayActorError, RayTaskError) as error:
            self.stop()
            raise RayServerError(f"a server actor failed while loading: {error}") from None

    def current_addresses(self) -> list[str]:
        """Where the live actors' servers listen now; an actor that is restarting, or dead for good, is left out.
        A restarted actor serves on a new port, so its address changes. Waits at most ADDRESS_WAIT_SECONDS: a
        question an actor has not answered yet (it is loading its model again) stays open for the next call."""
        import ray
        from ray.exceptions import RayError

        for index, actor in enumerate(self.actors):
            if index not in self._asked:
                self._asked[index] = actor.address.remote()
        asked = {reference: index for index, reference in self._asked.items()}
        ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=ADDRESS_WAIT_SECONDS)
        answering = set()
        for reference in ready:
            index = asked[reference]
            del self._asked[index]
            try:
                address = ray.get(reference)
            except RayError as error:
                if index not in self._down:
                    log.warning("Ray server actor %d is down (%s)", index, type(error).__name__)
                self._down.add(index)
                continue
            self._down.discard(index)
            answering.add(index)
            if address != self.addresses[index]:
                log.info("Ray restarted server actor %d: it now serves on %s", index, address)
                self.addresses[index] = address
        return [self.addresses[index] for index in sorted(answering)]

    def client_security(self, remote: ClientSecurity) -> ClientSecurity:
        """How the fleet talks to these servers: plaintext (fleet.insecure or loopback) with the run's token."""
        return replace(remote.plaintext(), token=self.token)

    def peak_rss_bytes(self) -> list[int]:
        """Peak resident memory of each live server actor (best effort)."""
        import ray
        from ray.exceptions import RayError

        try:
            return ray.get([actor.peak_rss_bytes.remote() for actor in self.actors], timeout=ADDRESS_WAIT_SECONDS)
        except RayError:
            return []

    def stop(self) -> None:
        """Stop and kill every server actor (without restart) and, if this process started Ray, shut it down."""
        import ray
        from ray.exceptions import RayError

        # A graceful stop first, so each removes its token file; an actor that does not answer is killed anyway.
        with contextlib.suppress(RayError):
            ray.get([actor.stop.remote() for actor in self.actors], timeout=10)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors.clear()
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False
