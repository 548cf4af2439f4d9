"""A Seedcast server inside a Ray actor (fleet.launcher=ray): the actor's process is the server's process.

The optimizer's Ray launcher wraps `ServerActor` with `ray.remote` (so importing this module needs no Ray) and
creates one actor per server. The actor loads the model, serves gRPC on its node's address with a free port and
answers the launcher's questions (where it listens, on which node). When the actor dies, its server dies with
it; when Ray restarts the actor, `__init__` runs again: a fresh server at step 0 on a new port, which the fleet
finds at its next iteration and readmits by Sync, as it does any restarted server.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from seedcast.inference_server.serve_config import ServeConfig
from seedcast.inference_server.server_thread import ServerThread

log = logging.getLogger("seedcast.server")


def _peak_rss_bytes() -> int:
    """This process's peak resident memory (VmHWM), 0 where /proc is unavailable."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class ServerActor:
    """One inference server in this Ray actor's process, serving until the actor ends.

    `options` are ServeConfig values without host, port and token file; `token` is the bearer token the run's
    servers require (written to a private file here, so it never lands in a config on disk); `host` is where to
    listen (None: the IP Ray knows this node by); `gpus` whether Ray gave the actor GPUs, so the server runs on
    `cuda` (the devices Ray made visible to it)."""

    def __init__(self, options: dict[str, Any], token: str | None, host: str | None, gpus: bool) -> None:
        import ray

        host = host or ray.util.get_node_ip_address()
        self._token_dir = tempfile.mkdtemp(prefix="seedcast-token-")
        token_file = None
        if token:
            token_file = os.path.join(self._token_dir, "token")
            with os.fdopen(os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
                handle.write(token)
        placed = {"device": "cuda"} if gpus else {}
        config = ServeConfig(**{**options, **placed, "host": host, "port": 0, "token_file": token_file})
        self._server = ServerThread(config, allowed_evaluators=tuple(config.allowed_evaluators))
        context = ray.get_runtime_context()
        self._placement = {
            "address": self._server.address,
            "node_id": context.get_node_id(),
            "pid": os.getpid(),
            "gpu_ids": [str(gpu) for gpu in ray.get_gpu_ids()],
            "device": config.device,
        }
        log.info("Ray server actor serving on %s (node %s)", self._server.address, self._placement["node_id"])

    def address(self) -> str:
        """Where this server listens, host:port."""
        return self._server.address

    def placement(self) -> dict[str, Any]:
        """Where it runs: address, Ray node id, process id, the GPU ids Ray gave it and the device it uses."""
        return dict(self._placement)

    def peak_rss_bytes(self) -> int:
        """The actor process's peak resident memory."""
        return _peak_rss_bytes()

    def stop(self) -> None:
        """Stop serving (the launcher then kills the actor) and remove the token file."""
        self._server.stop()
        for name in os.listdir(self._token_dir):
            os.remove(os.path.join(self._token_dir, name))
        os.rmdir(self._token_dir)
