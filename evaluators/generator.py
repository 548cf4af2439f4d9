"""What a generated task is made of: a pure function from (count, level, seed) to problems, its levels, and the
`task.` setting that holds the level a run uses (`tasks.Task.generator`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from seedcast.evaluators.base import Problem


@dataclass(frozen=True)
class Generator:
    """`problems(count, level, seed)` for each level in `levels`; `level_setting` names the `task.` setting (and
    the DatasetSpec field) holding the run's level."""

    problems: Callable[[int, int, int], list[Problem]]
    levels: Mapping[int, Any]
    level_setting: str

    def level_problem(self, level: int) -> str | None:
        """What is wrong with `level` for this task (None: it is one of its levels)."""
        if level in self.levels:
            return None
        return f"task.{self.level_setting}: set one of {sorted(self.levels)}"
