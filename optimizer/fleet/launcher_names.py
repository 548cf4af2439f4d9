"""The launchers a run's own servers can be started by (fleet.launcher), without importing them: the config checks
names against this registry, and launcher.py maps each to its class."""

from __future__ import annotations

LAUNCHERS = {
    "local": "child processes of the optimizer on this machine",
    "ray": "Ray actors on a Ray cluster (fleet.ray; `pip install 'seedcast[ray]'`), restarted by Ray when they die",
}
