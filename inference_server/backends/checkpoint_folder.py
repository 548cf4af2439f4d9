"""A Hugging Face checkpoint folder for engines that cannot read our model specs (vLLM).

vLLM would load the bundled GGUF with its own quantized kernels, not as the dequantised float32
weights the `hf` backend and the exporter use. So a GGUF spec is converted once into a float32
safetensors folder in the cache (`$SEEDCAST_CACHE_DIR`, default `~/.cache/seedcast`), written to a
temporary folder and renamed into place so a crash never leaves a half-written checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
from pathlib import Path

from seedcast.inference_server.model_source import load_model_and_tokenizer, resolve_model


def cache_dir() -> Path:
    """Where converted checkpoints are kept."""
    return Path(os.environ.get("SEEDCAST_CACHE_DIR") or Path.home() / ".cache" / "seedcast")


def checkpoint_location(spec: str) -> str:
    """A folder (or hub id) holding `spec` as a float32/bf16 HF checkpoint; GGUF files are converted."""
    source = resolve_model(spec)
    if not source.gguf_file:
        return source.location
    gguf = Path(source.location) / source.gguf_file
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    folder = cache_dir() / "checkpoints" / f"{gguf.stem}-{key}"
    if (folder / "config.json").is_file():
        return str(folder)
    model, tokenizer = load_model_and_tokenizer(spec)
    partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    try:
        partial.rename(folder)
    except OSError:  # another server converted it meanwhile
        shutil.rmtree(partial, ignore_errors=True)
    return str(folder)


def checkpoint_parameters(location: str) -> int | None:
    """Parameters stored in a folder's safetensors files (headers only; None for hub ids or .bin files)."""
    folder = Path(location)
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        return None
    total = 0
    for file in files:
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length))
        total += sum(math.prod(entry["shape"]) for name, entry in header.items() if name != "__metadata__")
    return total
