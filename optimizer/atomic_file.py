"""Whole-file writes that a reader, or a crash, never sees half done: the text goes to a temporary file beside
the target, which is then renamed over it (a rename within one folder is atomic on POSIX file systems).

Run records (config.yaml, summary.json, metrics.jsonl after a resume), the claims file and its report, and the
evaluation files `seedcast compare` rewrites all go through here. The inference server writes its ready file the
same way with its own three lines: it may not import the optimizer (docs/architecture.md).
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomically(path: Path, text: str, durable: bool = False) -> None:
    """Replace `path` with `text` in one step: before the call returns the file holds either its old contents or
    all of `text`. `durable` also flushes the new contents to the disk before the rename (a record that must
    outlive a power cut, not only a killed process)."""
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w") as handle:
        handle.write(text)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    temporary.replace(path)
