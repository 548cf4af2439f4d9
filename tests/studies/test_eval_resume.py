"""An evaluation cut off goes on where it stopped: the calls kept and those made after form the same evaluation as an
uninterrupted one; a record of other samples, or a line cut off mid-write, is never mixed in."""

from __future__ import annotations

import asyncio
import json

import pytest

from seedcast.studies.eval_resume import PARTIAL_FILE, STALE_FILE, TIMING_FILE, EvalProgress
from seedcast.studies.evaluate import EvalOptions, eval_config, run_eval

REWARD = "task.evaluator=tests.tiny_model:contains_digit_reward"


def _evaluate(model: str, out, options: EvalOptions) -> dict:
    config = eval_config(model, limit=6, overrides=[REWARD, "fleet.threads_per_server=1"])
    return asyncio.run(run_eval(config, options, out))


class _CutOff(Exception):
    pass


def test_an_evaluation_cut_off_and_run_again_equals_one_made_at_once(tmp_path, tiny_model_dir, monkeypatch):
    options = EvalOptions(n=4, ks=[1, 2, 4], max_tokens=5, problems_per_call=2, seed=7)  # 3 calls
    whole = _evaluate(tiny_model_dir, tmp_path / "whole", options)

    recorded = []
    record = EvalProgress.record

    def record_then_die(self, call, problems, seconds=None):
        record(self, call, problems, seconds)
        recorded.append(call)
        if cut_after_first:
            raise _CutOff

    cut_after_first = True

    monkeypatch.setattr(EvalProgress, "record", record_then_die)
    with pytest.raises(_CutOff):
        _evaluate(tiny_model_dir, tmp_path / "cut", options)
    assert not (tmp_path / "cut" / "results.json").exists()
    assert len((tmp_path / "cut" / PARTIAL_FILE).read_text().splitlines()) == 2  # the header and one call

    recorded.clear()
    cut_after_first = False
    resumed = _evaluate(tiny_model_dir, tmp_path / "cut", options)
    assert len(recorded) == 2  # only the calls still missing
    assert resumed == whole
    assert (tmp_path / "cut" / "samples.jsonl").read_text() == (tmp_path / "whole" / "samples.jsonl").read_text()
    assert not (tmp_path / "cut" / PARTIAL_FILE).exists()
    timing = json.loads((tmp_path / "cut" / TIMING_FILE).read_text())
    assert timing["calls"] == timing["timed_calls"] == 3  # the call made before the cut keeps its time
    assert timing["sampling_seconds"] > 0
    assert timing["sampling_seconds"] == pytest.approx(3 * timing["seconds_per_call"])
    assert timing["machine"]["cores"] >= 1


def test_a_record_of_other_samples_is_set_aside_and_never_mixed_in(tmp_path):
    EvalProgress(tmp_path, {"weights": "sha256:a", "options": {"n": 4}}).record(0, [{"rewards": [1.0]}])
    assert EvalProgress(tmp_path, {"weights": "sha256:b", "options": {"n": 4}}).load() == {}
    assert (tmp_path / STALE_FILE).is_file()
    lines = (tmp_path / PARTIAL_FILE).read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"weights": "sha256:b", "options": {"n": 4}}]


def test_a_call_cut_off_mid_write_is_dropped_and_the_file_made_whole(tmp_path):
    header = {"weights": "spec:m", "options": {"ks": (1, 2)}}  # a tuple reads back as a list: still the same
    progress = EvalProgress(tmp_path, header)
    assert progress.load() == {}
    progress.record(2, [{"rewards": [0.0, 1.0]}])
    with (tmp_path / PARTIAL_FILE).open("a") as handle:
        handle.write('{"call": 0, "problems": [{"rewa')
    again = EvalProgress(tmp_path, header)
    assert again.load() == {2: [{"rewards": [0.0, 1.0]}]}
    again.record(0, [{"rewards": [1.0]}])
    assert EvalProgress(tmp_path, header).load() == {0: [{"rewards": [1.0]}], 2: [{"rewards": [0.0, 1.0]}]}


def test_each_calls_seconds_survive_a_resume_and_calls_recorded_without_them_count_as_untimed(tmp_path):
    header = {"weights": "spec:m"}
    EvalProgress(tmp_path, header).load()
    with (tmp_path / PARTIAL_FILE).open("a") as handle:  # a call recorded before times were kept
        handle.write(json.dumps({"call": 0, "problems": [{"rewards": [1.0]}]}) + "\n")
    first = EvalProgress(tmp_path, header)
    first.load()
    first.record(1, [{"rewards": [0.0]}], seconds=2.0)
    with (tmp_path / PARTIAL_FILE).open("a") as handle:
        handle.write('{"call": 2, "problems": [{"rewa')  # cut off: the file is rewritten on the next load
    again = EvalProgress(tmp_path, header)
    again.load()
    again.record(2, [{"rewards": [1.0]}], seconds=4.0)
    assert again.timing(3) == {"calls": 3, "timed_calls": 2, "sampling_seconds": 6.0, "seconds_per_call": 3.0}
    assert EvalProgress(tmp_path, header).timing(3)["timed_calls"] == 0  # nothing loaded yet
