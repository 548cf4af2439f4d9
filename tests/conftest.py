"""Shared fixtures: the tiny test model, the public data folder, an in-process server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tiny_model import build_tiny_model

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SEEDCAST_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A random tiny Llama saved as a Hugging Face folder (built once per session)."""
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-model")))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The public benchmark files beside the repository (../shared/data)."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"public data not found at {DATA_DIR}; set SEEDCAST_DATA to its folder")
    return DATA_DIR


@pytest.fixture(autouse=True)
def _tests_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let server subprocesses import `tests.tiny_model` evaluators by module:callable."""
    existing = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{REPO_ROOT}{os.pathsep}{existing}" if existing else str(REPO_ROOT))
