"""A server inside the calling process, on an event-loop thread of its own: what `seedcast.LocalServer` (notebooks,
tests) and a Ray server actor (fleet.launcher=ray) run. Unlike `seedcast serve` it installs no signal handlers
and never blocks the caller; the caller stops it."""

from __future__ import annotations

import asyncio
import threading

from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.security import ServerSecurity
from seedcast.inference_server.serve_config import ServeConfig
from seedcast.inference_server.server import start_server
from seedcast.inference_server.validation import Limits


class ServerThread:
    """Load `config`'s backend and serve it on config.host (port 0: a free one) until `stop()`.

    `allowed_evaluators` None accepts any evaluator spec (the process trusts itself); a tuple allows only those,
    as `seedcast serve --allow-evaluator` does. TLS, the bearer token and the other ServeConfig options apply as
    they do for `seedcast serve`."""

    def __init__(self, config: ServeConfig, allowed_evaluators: tuple[str, ...] | None = None) -> None:
        security = ServerSecurity.from_files(
            config.tls_cert, config.tls_key, config.tls_ca, config.token_file, config.host, config.insecure
        )
        options = config.backend_options()
        self.backend = create_backend(config.backend, options.pop("model"), **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="seedcast-server", daemon=True)
        self._thread.start()
        starting = start_server(
            self.backend,
            config.host,
            config.port,
            Limits(allowed_evaluators=allowed_evaluators),
            None,
            security,
            config.max_concurrent_rpcs,
        )
        self._running = asyncio.run_coroutine_threadsafe(starting, self._loop).result()
        self.port = self._running.port
        host = config.host
        self.address = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def stop(self, grace_seconds: float = 1.0) -> None:
        """Stop serving and end the thread (idempotent)."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._running.stop(grace_seconds), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
