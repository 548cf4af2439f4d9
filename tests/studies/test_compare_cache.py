"""`seedcast compare`'s evaluation cache: reused when it measured the same thing, scored again (not sampled) when
only a built-in reward differs, sampled again otherwise, and never damaged by an evaluation that cannot run."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from seedcast.evaluators.datasets import DatasetSpec
from seedcast.evaluators.tasks import default_instruction
from seedcast.optimizer.config import ConfigError
from seedcast.studies.compare import Entry, entry_identity, evaluate_entries, recorded_alike
from seedcast.studies.evaluate import EvalOptions
from seedcast.studies.rescore import rescore

REFERENCE = "2,4,7,9=37"  # (9 - 4) * 7 + 2
INSTRUCTION = default_instruction("countdown")
OPTIONS = EvalOptions(n=2, ks=[1, 2], max_tokens=32, seed=5)
DATASET = asdict(DatasetSpec(kind="countdown", limit=2, countdown_difficulty=8, synthetic_seed=5))
# Two problems, two samples each: right and stated right; right but stating a wrong result (the lenient reward's
# blind spot); wrong; right.
COMPLETIONS = [["(9 - 4) * 7 + 2 = 37", "(9 - 4) * 7 + 2 = 969"], ["9 * 4 + 1", "2 + 7 * (9 - 4)"]]


class SamplingNotExpected(Exception):
    """Raised by the tests' make_config: the cache should have served."""


def _never_sample(model: str):
    raise SamplingNotExpected(model)


def _cached_evaluation(tmp_path, dataset: dict | None = None, evaluator: str = "countdown") -> tuple[Entry, object]:
    """A `spec` entry and its cache under OUT/evals, recorded as an evaluation made before `keep_columns` and
    `instruction` were recorded (as every committed Countdown evaluation was), scored by `evaluator`."""
    out = tmp_path / "out"
    entry = Entry(label="base", path="some/model", kind="spec")
    folder = out / "evals" / entry.label
    folder.mkdir(parents=True)
    (folder / "entry.json").write_text(json.dumps({"path": entry.path, "identity": entry_identity(entry)}))
    record = {
        "model": entry.path,
        "evaluator": evaluator,
        "dataset": dataset if dataset is not None else {k: v for k, v in DATASET.items() if k != "keep_columns"},
        "options": asdict(OPTIONS),
        "inference": {"backend": "hf", "device": "cpu", "dtype": "float32"},
        "mean_completion_tokens": 11.0,
    }
    (folder / "results.json").write_text(json.dumps(record))
    rows = [
        {"prompt": f"problem {i}", "reference": REFERENCE, "completions": c, "truncated": [False, False]}
        | {"entropies": [0.5, 0.5], "rewards": [0.0, 0.0]}
        for i, c in enumerate(COMPLETIONS)
    ]
    (folder / "samples.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    results = rescore(folder, evaluator)  # the numbers, as the evaluation would have written them
    del results["rescored_from"], results["instruction"]
    (folder / "results.json").write_text(json.dumps(results))
    return entry, out


def test_a_record_missing_a_field_added_since_counts_it_at_its_default():
    assert recorded_alike({k: v for k, v in DATASET.items() if k != "keep_columns"}, DATASET, DatasetSpec)
    assert not recorded_alike({**DATASET, "keep_columns": True}, DATASET, DatasetSpec)
    assert not recorded_alike({**DATASET, "limit": 3}, DATASET, DatasetSpec)
    assert not recorded_alike({**DATASET, "unknown": 1}, DATASET, DatasetSpec)
    assert not recorded_alike(None, DATASET, DatasetSpec)


def test_a_cache_recorded_before_a_dataset_field_existed_is_reused(tmp_path):
    entry, out = _cached_evaluation(tmp_path)
    evaluate_entries([entry], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown", INSTRUCTION))
    assert entry.results["pass_at_k"]["1"]["mean"] == pytest.approx(0.75)  # lenient: 3 of 4 right
    assert entry.per_problem_correct == [[True, True], [False, True]]
    assert entry.results["stated_wrong_result_rate"] == pytest.approx(0.25)  # "= 969": paid for, though wrong


def test_a_lenient_countdown_cache_is_scored_again_under_the_strict_reward(tmp_path):
    entry, out = _cached_evaluation(tmp_path)
    evaluate_entries([entry], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown-strict", INSTRUCTION))
    assert entry.per_problem_correct == [[True, False], [False, True]]  # "= 969" is now wrong
    assert entry.results["pass_at_k"]["1"]["mean"] == pytest.approx(0.5)
    assert entry.results["evaluator"] == "countdown-strict" and entry.results["rescored_from"] == "countdown"
    assert entry.results["mean_completion_tokens"] == 11.0  # lengths do not depend on scoring
    samples = [json.loads(line) for line in (out / "evals" / "base" / "samples.jsonl").read_text().splitlines()]
    assert samples[0]["rewards"] == [1.0, 0.0] and samples[0]["completions"] == COMPLETIONS[0]
    # Scored under the strict reward now, the cache serves it as it is; and the lenient reward again by rescoring.
    evaluate_entries([entry], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown-strict", INSTRUCTION))
    evaluate_entries([entry], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown", INSTRUCTION))
    assert entry.per_problem_correct == [[True, True], [False, True]]
    assert entry.results["rescored_from"] == "countdown"  # the evaluator that sampled, not the last one to score


@pytest.mark.parametrize(
    "scoring",
    [
        ("countdown-strict", "Reply with the expression only."),  # prompts asked otherwise: other samples
        ("tests.tiny_model:digit_fraction_reward", INSTRUCTION),  # a user's function is never run on old samples
    ],
)
def test_a_cache_that_scoring_again_cannot_serve_is_sampled_again(tmp_path, scoring):
    entry, out = _cached_evaluation(tmp_path)
    with pytest.raises(SamplingNotExpected):
        evaluate_entries([entry], out, _never_sample, OPTIONS, DATASET, "float32", scoring)


def test_an_evaluation_that_cannot_run_keeps_the_cache_beside_it(tmp_path):
    """A published GRPO copy (no model/) asked for other sampling options: a clear error, and its cached
    evaluation and parameter geometry (measured where it trained, on the same weights) stay as they were."""
    run = tmp_path / "published-grpo"
    run.mkdir()
    (run / "config.yaml").write_text("seed: 0\n")
    (run / "trl_log.jsonl").write_text("")
    entry = Entry(label="grpo", path=str(run), kind="grpo")
    out = tmp_path / "out"
    folder = out / "evals" / "grpo"
    folder.mkdir(parents=True)
    (folder / "entry.json").write_text(json.dumps({"path": entry.path, "identity": entry_identity(entry)}))
    (folder / "results.json").write_text(json.dumps({"options": asdict(OPTIONS), "dataset": DATASET}))
    (folder / "geometry.json").write_text('{"threshold": 0.0}')
    kept = {path.name: path.read_bytes() for path in folder.iterdir()}
    other = EvalOptions(n=4, ks=[1, 2, 4], max_tokens=32, seed=5)
    with pytest.raises(ConfigError, match="without its weights"):
        evaluate_entries([entry], out, _never_sample, other, DATASET, "float32", ("countdown", INSTRUCTION))
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == kept


def test_an_evaluation_whose_samples_were_not_kept_is_judged_from_its_per_problem_counts(tmp_path):
    """n = 256 evaluations commit results.json without samples.jsonl: compare judges them the same from the counts
    results.json keeps; only scoring them again under another reward needs the samples (then it samples again)."""
    entry, out = _cached_evaluation(tmp_path)
    evaluate_entries([entry], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown", INSTRUCTION))
    (out / "evals" / "base" / "samples.jsonl").unlink()
    alone = Entry(label="base", path="some/model", kind="spec")
    evaluate_entries([alone], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown", INSTRUCTION))
    assert [sum(c) for c in alone.per_problem_correct] == [sum(c) for c in entry.per_problem_correct] == [2, 1]
    assert all(len(c) == OPTIONS.n for c in alone.per_problem_correct)
    assert alone.per_problem_entropy == entry.per_problem_entropy == [0.5, 0.5]
    assert alone.results["stated_wrong_result_rate"] == entry.results["stated_wrong_result_rate"] == 0.25
    with pytest.raises(SamplingNotExpected):
        evaluate_entries([alone], out, _never_sample, OPTIONS, DATASET, "float32", ("countdown-strict", INSTRUCTION))
