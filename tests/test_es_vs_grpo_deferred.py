"""The bench's comparisons wait on evaluations that --stop-by left for later (bench/es_vs_grpo.py): a comparison's
`seedcast compare` evaluates whatever it lacks itself, with no deadline, so running it then would overrun the
session by every deferred evaluation."""

from __future__ import annotations

import pytest

from tests.bench_plan_stand_in import COUNTDOWN_TO_THE_END, es_vs_grpo, plan_without_processes


def test_the_comparisons_wait_on_evaluations_left_for_later(tmp_path, monkeypatch, capsys):
    overrun = {"es:wall@1"}  # one ES run whose evaluation would not end by --stop-by
    monkeypatch.setattr(es_vs_grpo, "overruns", lambda plan, label, least=0.0: label in overrun)
    compared, _ = plan_without_processes(monkeypatch, tmp_path)
    stop_by = es_vs_grpo.time.time() + 3600
    with pytest.raises(es_vs_grpo.OutOfTime, match="the comparisons wait on es:wall@1's evaluations"):
        es_vs_grpo.run_plan(es_vs_grpo.Plan("countdown", tmp_path, False, stop_by), COUNTDOWN_TO_THE_END)
    assert compared == [] and "es:wall@1: evaluations left for a later invocation" in capsys.readouterr().out
    overrun.clear()  # the next invocation evaluates it, then compares
    es_vs_grpo.run_plan(es_vs_grpo.Plan("countdown", tmp_path, False, stop_by), COUNTDOWN_TO_THE_END)
    assert len(compared) == len(es_vs_grpo.comparisons("countdown"))
