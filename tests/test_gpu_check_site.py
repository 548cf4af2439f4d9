"""The GPU check's site setup: Seedcast importable from the checkout where nothing was installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench" / "gpu_check"))

from site_setup import fits_this_python, install_wheels, seedcast_source_tree  # noqa: E402


def test_the_source_tree_makes_the_checkout_importable_without_an_install(tmp_path):
    root = seedcast_source_tree(tmp_path)
    seedcast_source_tree(tmp_path)  # a second call (a rerun on the same machine) replaces the links
    # -S: no site-packages, so the installed seedcast cannot answer; -I ignores PYTHONPATH and the cwd.
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import seedcast.evaluators.countdown as c; print(c.__file__)"
    )
    done = subprocess.run([sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, check=True)
    assert Path(done.stdout.strip()).resolve() == REPO_ROOT / "evaluators" / "countdown.py"


def test_wheels_for_another_python_are_not_installed(tmp_path, capsys):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    foreign = "pydantic_core-2.50.5-cp30-cp30-manylinux2014_x86_64.whl"
    (wheels / foreign).write_bytes(b"")
    assert not fits_this_python(foreign) and fits_this_python("pytest-9.2.0-py3-none-any.whl")
    assert install_wheels(wheels, tmp_path / "site") is None
    assert foreign in capsys.readouterr().err
    assert install_wheels(tmp_path / "missing", tmp_path / "site") is None
