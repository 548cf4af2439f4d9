"""ES strategies by name (`es.strategy`): the one list of what exists.

A strategy is built from the `es` section's settings as keyword arguments (`ESConfig.strategy_options`) and
implements `ask(state) -> list[Member]` and `tell(state, members, fitness) -> (ESStep, state)`. A new one is
a module in this package and one line here; the config accepts its name without further edits.
"""

from __future__ import annotations

from typing import Any

from seedcast.optimizer.es.strategy import OpenES

STRATEGIES: dict[str, type] = {
    "openes": OpenES,
}


def make_strategy(name: str, **options: Any) -> Any:
    """The strategy `name` built with `options` (keyword arguments of its constructor)."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown ES strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[name](**options)
