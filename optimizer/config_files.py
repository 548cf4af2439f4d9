"""Reading a TrainConfig: defaults ← a run's snapshot ← YAML file ← `key=value` overrides, validated together
with every problem reported at once; and the one-line-per-key reference behind `--help-config`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from seedcast.optimizer import config as schema  # config_files reads into the schema; never the reverse
from seedcast.optimizer.shipped_configs import config_path
from seedcast.proto.choices import field_choices


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise schema.ConfigError(f"{dotted}: {part} is a value, not a section")
        node = child
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """`["es.sigma=0.01", "fleet.servers=[a:1,b:2]"]` → nested dict; values parsed as YAML scalars/lists."""
    tree: dict[str, Any] = {}
    bad = [item for item in overrides if "=" not in item or not item.split("=", 1)[0]]
    if bad:
        raise schema.ConfigError("overrides must look like key=value (e.g. es.sigma=0.002): " + ", ".join(bad))
    for item in overrides:
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw else ""
        except yaml.YAMLError:
            value = raw
        _set_dotted(tree, key.strip(), value)
    return tree


def merge_settings(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra`'s settings on top, section by section."""
    merged = dict(base)
    for key, value in extra.items():
        both_sections = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = merge_settings(merged[key], value) if both_sections else value
    return merged


def _describe(error: dict[str, Any]) -> str:
    location = ".".join(str(part) for part in error["loc"]) or "config"
    if error["type"] == "extra_forbidden":
        return f"{location}: unknown key; remove it or check its spelling (`seedcast train --help-config` lists keys)"
    message = error["msg"].removeprefix("Value error, ")
    if location != "config" and message.startswith(location.split(".")[0]):
        return message
    return f"{location}: {message}"


def build_config(data: dict[str, Any]) -> schema.TrainConfig:
    """Validate a config tree; every problem is reported at once in a ConfigError."""
    try:
        return schema.TrainConfig.model_validate(data)
    except ValidationError as error:
        lines = [f"  - {_describe(item)}" for item in error.errors()]
        raise schema.ConfigError(f"{len(lines)} configuration problem(s):\n" + "\n".join(lines)) from None


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, base: dict[str, Any] | None = None
) -> schema.TrainConfig:
    """Defaults ← `base` (a run's snapshot) ← YAML file ← key=value overrides, validated together."""
    data: dict[str, Any] = dict(base or {})
    if path is not None:
        path = config_path(path)
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as error:
            raise schema.ConfigError(f"config file {path} is not valid YAML: {error}") from None
        if not isinstance(loaded, dict):
            raise schema.ConfigError(f"config file {path} must hold a mapping of keys, not {type(loaded).__name__}")
        data = merge_settings(data, loaded)
    data = merge_settings(data, parse_overrides(overrides or []))
    return build_config(data)


def config_reference(model: type[BaseModel] | None = None, prefix: str = "") -> list[str]:
    """One line per key: `es.sigma = 0.002  Noise scale σ.` (for --help-config and docs)."""
    model = model or schema.TrainConfig
    lines = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines.extend(config_reference(annotation, f"{prefix}{name}."))
            continue
        default = field.get_default(call_default_factory=True)
        choices = field_choices(field)
        text = (field.description or "") + (f" One of: {', '.join(choices)}." if choices else "")
        lines.append(f"{prefix}{name} = {default!r}  {text}".rstrip())
    return lines
