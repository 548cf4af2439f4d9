"""Dataset loaders: files in the layouts of the public GSM8K, MATH-500, AIME and DeepScaleR
releases, generic JSONL / JSON / Parquet with a field mapping, the offline synthetic and Countdown
tasks, and the
Hugging Face hub (when it is reachable and `datasets` is installed).

Field paths are dotted and may index lists: `prompt.0.content`, `reward_model.ground_truth`.

    load_problems(DatasetSpec(kind="gsm8k", path="data/gsm8k/test.jsonl"))
    load_problems(DatasetSpec(kind="jsonl", path="mine.jsonl", prompt_field="q", answer_field="a"))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seedcast.evaluators.base import Problem
from seedcast.evaluators.tasks import DATASET_KINDS, HUB, TASKS
from seedcast.proto.errors import SeedcastError


class DatasetError(SeedcastError, ValueError):
    """A dataset that cannot be loaded as specified."""


@dataclass(frozen=True)
class DatasetSpec:
    """Where problems come from. `path` is a file for file kinds and a hub id for `hf`."""

    kind: str = "synthetic"
    path: str | None = None
    split: str = "train"
    prompt_field: str | None = None
    answer_field: str | None = None
    limit: int | None = None
    synthetic_size: int = 2000
    synthetic_difficulty: int = 2
    synthetic_seed: int = 0  # the seed of generated problems (every generated task)
    countdown_difficulty: int = 1  # each generated task's level is the field its Generator.level_setting names
    keep_columns: bool = False  # keep each record's other fields (Problem.columns) for TRL-style rewards


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a `.jsonl`, `.json` (one array) or `.parquet` file."""
    if not path.is_file():
        raise DatasetError(f"dataset file {path} does not exist")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.suffix == ".json":
        records = json.loads(path.read_text())
        if not isinstance(records, list):
            raise DatasetError(f"{path} holds a JSON {type(records).__name__}; expected an array of objects")
        return records
    records = []
    with path.open() as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise DatasetError(f"{path}:{number}: not JSON ({error})") from error
    return records


def field_value(record: dict[str, Any], dotted: str) -> Any:
    """Follow a dotted path (`a.0.b`) through dicts and lists; KeyError names the missing part."""
    value: Any = record
    for part in dotted.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise KeyError(f"field {dotted!r} (at {part!r}); record has keys {sorted(record)}")
    return value


def answer_text(value: Any) -> str:
    """Reference answers as strings: 142.0 -> "142", ["5"] -> "5"."""
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _problems_from_records(records: list[dict[str, Any]], spec: DatasetSpec, origin: str) -> list[Problem]:
    task = TASKS[spec.kind]
    prompt_field, answer_field = spec.prompt_field or task.prompt_field, spec.answer_field or task.answer_field
    problems = []
    for index, record in enumerate(records):
        try:
            prompt, messages = prompt_and_messages(field_value(record, prompt_field))
            # Reward functions in TRL's convention read the columns; a reference is optional for them.
            answer = _optional(record, answer_field) if spec.keep_columns else field_value(record, answer_field)
        except KeyError as error:
            raise DatasetError(
                f"{origin} record {index}: missing {error.args[0]}; set task.prompt_field / task.answer_field"
            ) from error
        reference = answer_text(answer)
        if task.reference is not None:
            reference = task.reference(reference) or reference
        columns = _other_columns(record, prompt_field) if spec.keep_columns else ""
        problem_id = f"{origin}#{index}"
        problems.append(Problem(prompt, reference, problem_id, columns=columns, messages=messages))
    return problems


def prompt_and_messages(value: Any) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A prompt field's text, and its messages when it is a conversation (TRL's conversational format: a list
    of {"role", "content"}), whose text is then the last user message's."""
    is_conversation = isinstance(value, list) and value and all(isinstance(m, dict) for m in value)
    if not is_conversation:
        return str(value), ()
    if not all(isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value):
        raise DatasetError("a prompt that is a conversation needs a string role and content in every message")
    messages = tuple((m["role"], m["content"]) for m in value)
    users = [content for role, content in messages if role == "user"]
    return (users[-1] if users else messages[-1][1]), messages


def _optional(record: dict[str, Any], dotted: str) -> Any:
    try:
        return field_value(record, dotted)
    except KeyError:
        return ""


def _other_columns(record: dict[str, Any], prompt_field: str) -> str:
    """A record's fields but the prompt's, as a JSON object (values JSON cannot hold are written as text)."""
    prompt_key = prompt_field.split(".")[0]
    return json.dumps({key: value for key, value in record.items() if key != prompt_key}, default=str)


def _hub_records(spec: DatasetSpec) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError as error:
        raise DatasetError("kind 'hf' needs the `datasets` package: pip install 'seedcast[hub]'") from error
    if not spec.path:
        raise DatasetError("kind 'hf' needs task.path set to a hub dataset id, e.g. openai/gsm8k")
    name, _, config = spec.path.partition(":")
    try:
        return list(datasets.load_dataset(name, config or None, split=spec.split))
    except Exception as error:  # the hub raises many types; all mean "not loadable here"
        raise DatasetError(f"cannot load {spec.path} from the hub ({error}); use a local file instead") from error


def load_problems(spec: DatasetSpec) -> list[Problem]:
    """All problems of a dataset spec (at most `limit`)."""
    task = TASKS.get(spec.kind)
    if task is None:
        raise DatasetError(f"unknown dataset kind {spec.kind!r}; choose one of {', '.join(DATASET_KINDS)}")
    if task.generator is not None:
        level = getattr(spec, task.generator.level_setting)
        problems = task.generator.problems(spec.synthetic_size, level, spec.synthetic_seed)
    elif task.source == HUB:
        problems = _problems_from_records(_hub_records(spec), spec, spec.path or "hub")
    else:
        if not spec.path:
            raise DatasetError(f"dataset kind {spec.kind!r} needs task.path (a .jsonl, .json or .parquet file)")
        problems = _problems_from_records(read_records(Path(spec.path)), spec, Path(spec.path).name)
    if not problems:
        raise DatasetError(f"dataset {spec.kind} {spec.path or ''} has no problems")
    return problems[: spec.limit] if spec.limit else problems
