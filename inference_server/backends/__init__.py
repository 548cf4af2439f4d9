"""Inference backends, chosen by name with `seedcast serve --backend NAME`."""

from __future__ import annotations

import importlib
from typing import Any

from seedcast.inference_server.backends.base import Backend

# Qualified names, imported on demand: a backend's heavy dependencies load only when it is used.
BACKENDS: dict[str, str] = {
    "hf": "seedcast.inference_server.backends.hf:HFBackend",
    "vllm": "seedcast.inference_server.backends.vllm_engine:VLLMBackend",
}


def create_backend(name: str, model: str, **options: Any) -> Backend:
    """Instantiate the backend `name` for `model`; unknown names list the known ones."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of: {', '.join(sorted(BACKENDS))}")
    module_name, class_name = BACKENDS[name].split(":")
    backend_class = getattr(importlib.import_module(module_name), class_name)
    return backend_class(model, **options)
