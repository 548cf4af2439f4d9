"""Noise kinds by name (`es.noise`, `seedcast serve --noise`): the one list of what exists."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the kind names load without torch (the CLI's flags list them)
    from seedcast.inference_server.noise.source import NoiseSource

NOISE_KINDS = ("gaussian", "table")


def noise_source(kind: str) -> NoiseSource:
    """The source for a noise kind ("gaussian" or "table"); the table is built once per process."""
    if kind == "gaussian":
        from seedcast.inference_server.noise.gaussian import GAUSSIAN

        return GAUSSIAN
    if kind == "table":
        from seedcast.inference_server.noise.table import shared_noise_table

        return shared_noise_table()
    raise ValueError(f"unknown noise kind {kind!r}; choose one of {', '.join(NOISE_KINDS)}")
