"""`seedcast.train(reward_funcs=[...])`: reward functions in TRL's convention, given as the functions
themselves, made reachable by the inference servers with no extra step.

A function the servers can import (defined at the top level of an importable module) is named by its
`module:function` spec and imported there. Any other (written in a notebook or a script's `__main__`, a lambda,
a closure) is served from this process over HTTP on loopback, at an address with a random token in its path,
for as long as the run lasts; the servers call it as a `remote:` part of the `trl:` spec
(evaluators/trl_rewards.py). Local servers may call exactly the run's spec, so nothing else is opened to them.
"""

from __future__ import annotations

import importlib
import json
import secrets
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from seedcast.evaluators.base import checked_any_scale

RewardFunction = Callable[..., Sequence[float | None]] | str


def importable_spec(function: Callable) -> str | None:
    """`module:name` when importing it elsewhere gives this very function; None otherwise."""
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or module == "__main__" or not name.isidentifier():
        return None
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return f"{module}:{name}" if found is function else None


class RewardFunctionServer:
    """Serves reward functions over HTTP on loopback, one path each (POST {prompts, completions, columns})."""

    def __init__(self) -> None:
        self.functions: list[Callable] = []
        self.token = secrets.token_hex(16)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                status, answer = server.answer(self.path, self.rfile.read(int(self.headers.get("Content-Length", 0))))
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, name="seedcast-reward-functions", daemon=True)
        self.thread.start()

    def add(self, function: Callable) -> str:
        """Serve `function`; its `remote:` spec part."""
        self.functions.append(function)
        port = self.http.server_address[1]
        return f"remote:http://127.0.0.1:{port}/reward/{len(self.functions) - 1}/{self.token}"

    def answer(self, path: str, body: bytes) -> tuple[int, dict]:
        """Call the function the path names on the batch in the body."""
        parts = path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "reward" or parts[2] != self.token or not parts[1].isdigit():
            return 404, {"error": "no such reward function"}
        index = int(parts[1])
        if index >= len(self.functions):
            return 404, {"error": "no such reward function"}
        function = self.functions[index]
        name = getattr(function, "__name__", "reward function")
        try:
            batch = json.loads(body)
            values = function(prompts=batch["prompts"], completions=batch["completions"], **batch.get("columns", {}))
            return 200, {"rewards": [checked_any_scale(value, name) for value in values]}
        except Exception as error:  # the caller's function failed: the member fails with the reason
            return 500, {"error": f"{type(error).__name__}: {error}"}

    def close(self) -> None:
        """Stop serving."""
        self.http.shutdown()
        self.http.server_close()


def reward_specs(functions: Sequence[RewardFunction]) -> tuple[list[str], RewardFunctionServer | None]:
    """The `task.reward_funcs` entries for these functions (specs as given, importable functions by name, the
    rest served from this process), and the server that serves them (None when none needs serving)."""
    specs, server = [], None
    for function in functions:
        if isinstance(function, str):
            specs.append(function)
            continue
        if not callable(function):
            raise TypeError(f"reward_funcs takes functions or 'module:function' strings, not {type(function).__name__}")
        spec = importable_spec(function)
        if spec is None:
            server = server or RewardFunctionServer()
            spec = server.add(function)
        specs.append(spec)
    return specs, server
