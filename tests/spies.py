"""Counting spies: how tests see what a backend did (which hook ran) without counters in production code."""

from __future__ import annotations

from typing import Any


def record_calls(target: Any, method: str) -> list[tuple[Any, ...]]:
    """Wrap `target.method` (on this instance only) so every call's arguments are appended to the returned list;
    the method still runs."""
    original = getattr(target, method)
    calls: list[tuple[Any, ...]] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append((*args, *kwargs.values()))
        return original(*args, **kwargs)

    setattr(target, method, spy)
    return calls
