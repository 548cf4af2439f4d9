"""Which remote reward endpoints a server may call: `--allow-evaluator remote:...` entries must fix the host.

A `remote:URL` evaluator makes the server POST to URL. Allowed with a bare `remote:` prefix, any caller with the
token could point a server at any host (an internal service, a cloud metadata address) and read back what
came: the entries must name their endpoints, and the server follows no redirect and quotes no answer
(evaluators/reward_model.py).
"""

from __future__ import annotations

from urllib.parse import urlsplit

REMOTE = "remote:"


def remote_allowance_problem(allowed: str) -> str | None:
    """What is wrong with an `--allow-evaluator remote:...` entry (None: it names its endpoints). It must fix the
    host: `remote:https://HOST[:PORT]/PATH` exactly, or a prefix ending in `/` after the host; a bare `remote:`
    would let any caller make the server request any URL and read what came back."""
    if not allowed.startswith(REMOTE):
        return None
    parts = urlsplit(allowed.removeprefix(REMOTE))
    if parts.scheme not in ("http", "https") or not parts.hostname or not parts.path.startswith("/"):
        return (
            f"--allow-evaluator {allowed[:80]}: name the endpoint, remote:https://HOST[:PORT]/PATH, or a prefix "
            "ending in / after the host; a bare remote: would let any caller make this server request any URL"
        )
    return None
