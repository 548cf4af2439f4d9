"""An evaluation cut off goes on where it stopped: the calls kept and those made after form the same evaluation as an
uninterrupted one; a record of other samples, or a line cut off mid-write, is never mixed in. One stopped on
purpose (`--sample-until`) starts no call that would not end in time and resumes the same way."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta

import pytest

from seedcast import commands
from seedcast.cli import EXIT_PAUSED, main
from seedcast.studies import compare
from seedcast.studies.eval_resume import PARTIAL_FILE, STALE_FILE, TIMING_FILE, EvalProgress, EvaluationPaused
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


def test_calls_timed_on_another_kind_of_machine_do_not_set_this_ones_timing(tmp_path):
    header, fast, slow = {"weights": "spec:m"}, {"isa": "amx_bf16", "cores": 2}, {"isa": "avx2", "cores": 2}
    earlier = EvalProgress(tmp_path, header, machine=fast)
    earlier.load()
    earlier.record(0, [{"rewards": [1.0]}], seconds=2.0)
    earlier.record(1, [{"rewards": [0.0]}], seconds=2.0)
    here = EvalProgress(tmp_path, header, machine=slow)
    assert sorted(here.load()) == [0, 1]  # the samples carry over whatever machine made them
    here.record(2, [{"rewards": [1.0]}], seconds=5.0)
    assert here.timing(3) == {"calls": 3, "timed_calls": 1, "sampling_seconds": 5.0, "seconds_per_call": 5.0}
    back = EvalProgress(tmp_path, header, machine=fast)
    back.load()
    assert back.timing(3) == {"calls": 3, "timed_calls": 2, "sampling_seconds": 4.0, "seconds_per_call": 2.0}
    assert not back.call_fits(104.0, now=100.0)  # the longest call on any machine still bounds the next one


def test_an_evaluation_paused_at_its_sample_until_time_resumes_into_the_uninterrupted_one(
    tmp_path, tiny_model_dir, monkeypatch
):
    options = EvalOptions(n=4, ks=[1, 2, 4], max_tokens=5, problems_per_call=2, seed=7)  # 3 calls
    whole = _evaluate(tiny_model_dir, tmp_path / "whole", options)
    config = eval_config(tiny_model_dir, limit=6, overrides=[REWARD, "fleet.threads_per_server=1"])
    with pytest.raises(EvaluationPaused, match="0 of 3 Sample calls made, 3 left"):  # its time has passed
        asyncio.run(run_eval(config, options, tmp_path / "paused", sample_until=time.time() - 1))
    monkeypatch.setattr(EvalProgress, "call_fits", lambda self, deadline, now: not self.seconds)  # one call fits
    with pytest.raises(EvaluationPaused, match="1 of 3 Sample calls made, 2 left") as paused:
        asyncio.run(run_eval(config, options, tmp_path / "paused", sample_until=time.time() + 3600))
    assert (paused.value.made, paused.value.calls) == (1, 3)
    assert not (tmp_path / "paused" / "results.json").exists()
    assert len((tmp_path / "paused" / PARTIAL_FILE).read_text().splitlines()) == 2  # the header and one call
    monkeypatch.undo()
    assert _evaluate(tiny_model_dir, tmp_path / "paused", options) == whole


def test_a_call_starts_only_if_one_as_long_as_the_longest_so_far_ends_by_the_time_given(tmp_path):
    progress = EvalProgress(tmp_path, {"weights": "spec:m"})
    progress.load()
    assert progress.call_fits(None, now=100.0) and progress.call_fits(101.0, now=100.0)  # none timed: one starts
    assert not progress.call_fits(99.0, now=100.0)  # the time has passed
    progress.record(0, [], seconds=10.0)
    progress.record(1, [], seconds=30.0)
    assert progress.call_fits(130.0, now=100.0) and not progress.call_fits(129.0, now=100.0)


def test_the_command_line_exits_3_when_an_evaluation_pauses_and_refuses_a_malformed_time(tmp_path, monkeypatch, capsys):
    def pause(*args):
        assert args[-1] is not None  # the --sample-until time reached the evaluations
        raise EvaluationPaused(tmp_path, 2, 5)

    monkeypatch.setattr(commands, "evaluate", lambda args: pause(args.sample_until))
    monkeypatch.setattr(compare, "evaluate_entries", pause)
    until = (datetime.now() + timedelta(hours=1)).strftime("%H:%M")
    assert main(["eval", "--model", "m", "--out", str(tmp_path), "--sample-until", until]) == EXIT_PAUSED == 3
    assert "2 of 5 Sample calls made, 3 left" in capsys.readouterr().err
    argv = ["compare", "base=smollm2-135m-instruct", "--out", str(tmp_path), "--evaluate-only", "--sample-until", until]
    assert main(argv) == EXIT_PAUSED
    assert "the same command resumes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--model", "m", "--out", str(tmp_path), "--sample-until", "half past"])
    assert "--sample-until takes HH:MM" in capsys.readouterr().err
