"""The YAML configs that ship with Seedcast (the repository's `configs/`, installed as the package
`seedcast.configs`), so `--config gsm8k-cpu` works from an installed wheel as well as from a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from seedcast.optimizer.config import ConfigError

_PACKAGE = "seedcast.configs"


def shipped_config_names() -> list[str]:
    """The names of the shipped configs (file stems, e.g. `gsm8k-cpu`), sorted."""
    try:
        folder = resources.files(_PACKAGE)
    except ModuleNotFoundError:  # a source tree run without installing
        return []
    return sorted(entry.name.removesuffix(".yaml") for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def config_path(spec: str | Path) -> Path:
    """The file a `--config` value names: an existing path as given; else a shipped config by its name, with or
    without `.yaml` and `configs/` (the form the docs use, so commands copied from them work outside a checkout).
    A ConfigError lists the shipped names when it is neither."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path
    name = path.name.removesuffix(".yaml")
    if path.parent in (Path("."), Path("configs")) and name in shipped_config_names():
        return Path(str(resources.files(_PACKAGE) / f"{name}.yaml"))
    names = ", ".join(shipped_config_names()) or "none installed"
    raise ConfigError(f"config file {spec} does not exist, and it is not a shipped config's name (one of: {names})")
