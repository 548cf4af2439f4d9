"""Make `import seedcast` and the carried wheels work on a machine where nothing was pip-installed.

The GPU machine gets a copy of the repository and a folder of wheels (`make gpu-wheels`), and has no
network. `prepare_site` installs the wheels with `pip install --no-index --target` into `SITE/packages`,
and, when `seedcast` is not installed, builds `SITE/source/seedcast/` from symlinks to the repository's
folders (the same mapping as pyproject's package-dir), so the code that runs is always this checkout's.
Both go first on PYTHONPATH, for this process and for every process it starts (servers, pytest).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# pyproject's [tool.setuptools] package-dir: seedcast.<name> is the repository folder <name>, and the
# package root `seedcast` itself (the Python API) is api/.
SOURCE_FOLDERS = ("proto", "optimizer", "inference_server", "evaluators")
ROOT_FOLDER = "api"


def seedcast_source_tree(site: Path) -> Path:
    """SITE/source, holding a `seedcast` package whose modules and sub-packages link to the repository."""
    root = site / "source"
    package = root / "seedcast"
    package.mkdir(parents=True, exist_ok=True)
    links = [(package / folder, REPO_ROOT / folder) for folder in SOURCE_FOLDERS]
    links += [(package / module.name, module) for module in (REPO_ROOT / ROOT_FOLDER).glob("*.py")]
    for link, target in links:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=target.is_dir())
    return root


def fits_this_python(wheel: str) -> bool:
    """Whether a wheel file's tags match this interpreter and platform."""
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename

    supported = set(sys_tags())
    return any(tag in supported for tag in parse_wheel_filename(wheel)[3])


def install_wheels(wheels: Path, site: Path) -> Path | None:
    """Install every wheel in `wheels` into SITE/packages (offline, no dependency resolution: the folder
    holds exactly what the machine lacks). None when there are no wheels."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        return None
    foreign = [w.name for w in found if not fits_this_python(w.name)]
    if foreign:  # e.g. the GPU machine's cp312 wheels, on a machine rehearsing with another Python
        print(f"note: not installing {wheels}/: {', '.join(foreign)} do not fit this Python", file=sys.stderr)
        return None
    target = site / "packages"
    marker = target / ".installed-from"
    names = "\n".join(w.name for w in found)
    if marker.is_file() and marker.read_text() == names:
        return target
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--upgrade"]
    subprocess.run([*command, "--target", str(target), *map(str, found)], check=True)
    marker.write_text(names)
    return target


def prepare_site(site: Path, wheels: Path) -> list[str]:
    """Install the wheels and expose seedcast when needed; returns the paths put first on PYTHONPATH."""
    paths = []
    packages = install_wheels(wheels, site)
    if packages is not None:
        paths.append(str(packages))
    if importlib.util.find_spec("seedcast") is None:
        paths.append(str(seedcast_source_tree(site)))
    paths.append(str(REPO_ROOT))  # `tests.tiny_model` evaluators, imported by module:callable in servers
    existing = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, *([existing] if existing else [])])
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    importlib.invalidate_caches()
    return paths
