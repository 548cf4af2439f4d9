"""Config fields whose allowed values are a registry's names, read when a config is validated.

    backend: Annotated[str, one_of(BACKENDS, "backend")] = Field("hf", description=...)

The registry itself (a dict or tuple defined where the things live) is the one list of what exists: a config
holds a reference to it, not a copy, so an entry added to the registry is accepted without editing any config,
and `--help` texts and flag choices list the same names (`field_choices`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from pydantic import AfterValidator


class OneOf:
    """Check that a value is one of a registry's names; the registry is read at every check."""

    def __init__(self, registry: Collection[str], what: str, also: tuple[str, ...] = ()) -> None:
        self.registry = registry
        self.what = what
        self.also = also  # values the setting adds to the registry's, such as "auto"

    @property
    def choices(self) -> list[str]:
        """The allowed values: the setting's own (`also`), then the registry's names in its order."""
        return [*self.also, *self.registry]

    def __call__(self, value: str) -> str:
        if value not in self.also and value not in self.registry:
            raise ValueError(f"unknown {self.what} {value!r}; choose one of {', '.join(self.choices)}")
        return value


def one_of(registry: Collection[str], what: str, also: tuple[str, ...] = ()) -> AfterValidator:
    """Annotated metadata for a str field that must name an entry of `registry` or be one of `also` (`what`
    names the setting in errors)."""
    return AfterValidator(OneOf(registry, what, also))


def describe_choices(registry: Mapping[str, str]) -> str:
    """`name: what it does; ...` for a registry of one-line descriptions (help texts are built from it)."""
    return "; ".join(f"{name}: {text}" for name, text in registry.items())


def field_choices(field: Any) -> list[str] | None:
    """The allowed values of a pydantic field declared with `one_of`, else None."""
    for metadata in getattr(field, "metadata", ()):
        if isinstance(metadata, AfterValidator) and isinstance(metadata.func, OneOf):
            return metadata.func.choices
    return None
