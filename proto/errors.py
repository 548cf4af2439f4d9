"""The base class of every error a user can fix (a bad config, an unreachable server, a corrupt run).

It lives beside the wire contract because every layer (evaluators, servers, optimizer) raises such
errors and this package imports nothing of theirs. The CLI prints these errors as one line, without
a traceback, and exits with status 2; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class SeedcastError(Exception):
    """An error whose message tells the user what to change."""


class PortUnavailableError(SeedcastError, OSError):
    """A port to listen on is taken (or the address is not this machine's); the message names it."""

    def __init__(self, host: str, port: int, what: str, setting: str) -> None:
        super().__init__(
            f"cannot listen for {what} on {host}:{port}: the port is in use, or the address is not this machine's; "
            f"choose another with {setting} (0 picks a free one)"
        )
