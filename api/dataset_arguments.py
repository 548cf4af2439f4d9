"""`seedcast.train(dataset=...)` as TRL's trainers take it: a `datasets.Dataset`, a list of dicts (records with
a `prompt` field, TRL's standard format; other fields are the columns reward functions receive), or a data
file's path. Records in memory are written to RUN_DIR/dataset.jsonl, so the run folder holds its own data and
`--resume` and `seedcast export` need nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from seedcast.optimizer.config import ConfigError

DATASET_FILE = "dataset.jsonl"
FILE_KINDS = {".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}


def dataset_settings(dataset: Any, run_dir: Path, prompt_field: str | None) -> dict[str, Any]:
    """The `task` settings for `dataset`; records in memory are written into `run_dir` first."""
    if isinstance(dataset, str | Path):
        path = Path(dataset)
        if path.suffix not in FILE_KINDS:
            raise ConfigError(f"dataset {path}: a data file is .jsonl, .json or .parquet")
        return {"dataset": FILE_KINDS[path.suffix], "path": str(path.resolve())}
    records = _records(dataset)
    field = prompt_field or "prompt"
    missing = [index for index, record in enumerate(records) if field not in record]
    if missing:
        raise ConfigError(
            f"dataset: records {missing[:5]} have no {field!r} field (TRL's standard format has a `prompt` field; "
            "set task.prompt_field for another name)"
        )
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / DATASET_FILE
    with path.open("w") as handle:
        handle.writelines(json.dumps(dict(record), default=str) + "\n" for record in records)
    return {"dataset": "jsonl", "path": str(path.resolve()), "prompt_field": field}


def _records(dataset: Any) -> list[Mapping[str, Any]]:
    if not isinstance(dataset, Iterable) or isinstance(dataset, str | bytes | Mapping):
        raise ConfigError(
            f"dataset is a {type(dataset).__name__}; pass a datasets.Dataset, a list of dicts or a data file's path"
        )
    records = list(dataset)
    if not records:
        raise ConfigError("dataset has no records")
    bad = [index for index, record in enumerate(records) if not isinstance(record, Mapping)]
    if bad:
        raise ConfigError(f"dataset records {bad[:5]} are not dicts")
    return records
