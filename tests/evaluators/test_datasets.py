"""Dataset loaders on the public files and on generic files with a field mapping."""

from __future__ import annotations

import json

import pytest

from seedcast.evaluators.datasets import DatasetError, DatasetSpec, load_problems


@pytest.mark.parametrize(
    ("kind", "relative", "count", "first_reference"),
    [
        ("gsm8k", "gsm8k/test.jsonl", 1000, "18"),
        ("math500", "math500/test.jsonl", 500, "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("aime24", "aime2024/test.jsonl", 30, "204"),
        ("deepscaler", "deepscaler/train/aime.json", 975, "60"),
        ("deepscaler", "deepscaler/test/amc.json", 83, "142"),
        ("deepscaler", "deepscaler/test/math.json", 500, "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("deepscaler-verl", "deepscaler/subsets/deepscaler_train_subset2000_verl.parquet", 2000, "- \\frac{1}{4}"),
    ],
)
def test_public_files(data_dir, kind, relative, count, first_reference):
    problems = load_problems(DatasetSpec(kind=kind, path=str(data_dir / relative)))
    assert len(problems) == count
    assert problems[0].reference == first_reference
    assert all(p.prompt for p in problems)


def test_list_answers_take_the_first(data_dir):
    problems = load_problems(DatasetSpec(kind="deepscaler", path=str(data_dir / "deepscaler/test/olympiad_bench.json")))
    assert len(problems) == 675 and all(isinstance(p.reference, str) for p in problems)


def test_generic_jsonl_with_dotted_fields(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps({"q": {"text": f"q{i}"}, "a": [i]}) for i in range(5)) + "\n")
    problems = load_problems(
        DatasetSpec(kind="jsonl", path=str(path), prompt_field="q.text", answer_field="a.0", limit=3)
    )
    assert [(p.prompt, p.reference) for p in problems] == [("q0", "0"), ("q1", "1"), ("q2", "2")]


def test_missing_field_names_the_field_and_the_fix(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"question": "x"}) + "\n")
    with pytest.raises(DatasetError, match=r"answer.*task.answer_field"):
        load_problems(DatasetSpec(kind="jsonl", path=str(path), prompt_field="question"))


def test_missing_file_and_missing_path():
    with pytest.raises(DatasetError, match="does not exist"):
        load_problems(DatasetSpec(kind="gsm8k", path="/nonexistent.jsonl"))
    with pytest.raises(DatasetError, match="needs task.path"):
        load_problems(DatasetSpec(kind="jsonl"))


def test_synthetic_needs_no_files():
    problems = load_problems(DatasetSpec(kind="synthetic", synthetic_size=10, synthetic_difficulty=1))
    assert len(problems) == 10


def test_hub_kind_says_what_it_needs():
    with pytest.raises(DatasetError, match="datasets|hub"):
        load_problems(DatasetSpec(kind="hf", path="openai/gsm8k:main", split="test"))
