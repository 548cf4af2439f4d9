"""The base of every config section, and the error a config with problems raises."""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from seedcast.proto.errors import SeedcastError


class ConfigError(SeedcastError, ValueError):
    """One or more configuration problems, all listed in the message."""


class Section(BaseModel):
    """A config section: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied, validated like any config (pydantic's own model_copy does not validate,
        so `config.model_copy(update={"iterations": -1})` would make a config no file could hold)."""
        if not update:
            return super().model_copy(deep=deep)
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**values, **update})
