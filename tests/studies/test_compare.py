"""`seedcast compare`: paired differences, entry kinds, and a full report on two tiny runs."""

from __future__ import annotations

import json
import shutil

import pytest

from seedcast.cli import main
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.machine import describe, machine_kind
from seedcast.studies.compare import paired_difference, parse_entry
from seedcast.studies.pass_at_k import pass_at_k


def test_paired_difference_of_known_outcomes():
    base = [[False] * 4, [True, False, False, False], [True] * 4]
    better = [[True, False, False, False], [True, True, False, False], [True] * 4]
    one = paired_difference(base, better, k=1)
    assert one["mean"] == pytest.approx((0.25 + 0.25 + 0) / 3)
    assert one["ci95"][0] >= 0.0 and one["significant"] is False  # the third problem can be resampled alone
    full = paired_difference(base, better, k=4)
    assert full["mean"] == pytest.approx((pass_at_k(4, 1, 4) - 0 + 0) / 3)
    same = paired_difference(base, base, k=2)
    assert same == {"mean": 0.0, "ci95": [0.0, 0.0], "significant": False}
    with pytest.raises(ValueError, match="different problem counts"):
        paired_difference(base, better[:2], k=1)


def test_entry_kinds(tmp_path, tiny_model_dir):
    assert parse_entry(f"base={tiny_model_dir}").kind == "model"
    assert parse_entry("smollm2-135m-instruct").kind == "spec"
    assert parse_entry("smollm2-135m-instruct").label == "smollm2-135m-instruct"
    (tmp_path / "ev").mkdir()
    (tmp_path / "ev" / "results.json").write_text("{}")
    assert parse_entry(f"x={tmp_path / 'ev'}").kind == "eval"
    with pytest.raises(ConfigError, match="not an ES run"):
        parse_entry(str(tmp_path))


def test_compare_report_on_an_es_run_and_a_grpo_run(tmp_path, tiny_model_dir, capsys):
    common = [
        "iterations=2",
        "grpo.steps=2",
        "batch_size=2",
        "eval_every=1",
        "eval_size=4",
        "task.synthetic_size=50",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "sampling.max_new_tokens=4",
    ]
    es, grpo = tmp_path / "es", tmp_path / "grpo"
    assert (
        main(
            [
                "train",
                "--run-dir",
                str(es),
                "--no-progress",
                f"model.name={tiny_model_dir}",
                *common,
                "es.population=4",
                "es.sigma=0.05",
                "es.learning_rate=0.05",
                "sampling.temperature=1.0",
                "fleet.threads_per_server=1",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "grpo",
                "--run-dir",
                str(grpo),
                "--no-progress",
                f"model.name={tiny_model_dir}",
                *common,
                "grpo.group_size=4",
                "grpo.learning_rate=0.05",
            ]
        )
        == 0
    )
    for run in (es, grpo):  # where a run was timed is part of its numbers
        assert json.loads((run / "summary.json").read_text())["machine"] == machine_kind()
    out = tmp_path / "report"
    args = [
        "compare",
        f"base={tiny_model_dir}",
        f"es={es}",
        f"grpo={grpo}",
        "--out",
        str(out),
        "--evaluator",
        "tests.tiny_model:digit_fraction_reward",
        "--limit",
        "4",
        "--n",
        "4",
        "--k",
        "1,2,4",
        "--max-tokens",
        "4",
        "--local",
        "1",
    ]
    # Held-out problems are checked against the runs' own training: another seed or problem set is refused.
    assert main([*args, "--exclude-training-seeds", "5"]) == 2
    refused = capsys.readouterr().err
    assert f"es: {es} trained on seed 0" in refused and f"grpo: {grpo} trained on seed 0" in refused
    assert main([*args, "--exclude-training-seeds", "0"]) == 2
    assert "trained on other problems, synthetic_size=50 (evaluated: 2000)" in capsys.readouterr().err
    assert main(args) == 0
    report = (out / "report.md").read_text()
    for label in ("base", "es", "grpo"):
        assert f"| {label} | " in report
    assert "Paired difference against `base`" in report and "Parameter geometry" in report
    assert "Every entry sampled with hf on cpu, " in report  # one inference for all, so pairs compare models
    assert report.count(f" | {describe(machine_kind())} | ") == 2  # each run's wall time says where it was timed
    for name in ("pass_at_k.png", "reward_curves.png", "geometry.png"):
        assert (out / name).stat().st_size > 1000
    document = json.loads((out / "compare.json").read_text())
    entries = {e["label"]: e for e in document["entries"]}
    assert entries["es"]["kind"] == "es" and entries["grpo"]["kind"] == "grpo"
    assert entries["es"]["training"]["machine"] == entries["grpo"]["training"]["machine"] == machine_kind()
    assert set(document["paired_differences"]) == {"es", "grpo"}
    for label in ("es", "grpo"):
        geometry = entries[label]["geometry"]
        assert geometry["relative_l2"] > 0 and set(geometry["groups"]) >= {"attention", "mlp", "embedding"}
        training = entries[label]["training"]
        assert training["steps"] == 2 and training["completion_tokens"] > 0 and training["peak_rss_bytes"] > 0
        assert len(training["eval_reward_curve"]) == 3  # base, then after each of the 2 steps
    assert entries["base"]["geometry"] is None and entries["base"]["training"] == {}
    assert entries["es"]["results"]["problems"] == entries["grpo"]["results"]["problems"] == 4
    assert entries["es"]["training"]["completions"] == 2 * 4 * 2  # iterations x members x problems
    # A second compare reuses the cached evaluations (same options) instead of sampling again.
    cached = out / "evals" / "es" / "results.json"
    before = cached.stat().st_mtime_ns
    claims = tmp_path / "claims.json"
    assert main([*args, "--no-geometry", "--claims", str(claims), "--claims-task", "tiny"]) == 0
    assert cached.stat().st_mtime_ns == before
    checked = {c["claim"]: c for c in json.loads(claims.read_text())["tasks"]["tiny"]["claims"]}
    assert {"es_matches_grpo_at_pass_at_1", "es_beats_grpo_at_large_k", "es_keeps_entropy_grpo_collapses"} <= set(
        checked
    )
    assert all(c["verdict"] in ("reproduced", "not reproduced", "mixed") for c in checked.values())
    assert set(checked["es_beats_grpo_at_large_k"]["crossover"]["es"]) == {"k", "k_max"} | (
        {"difference"} if checked["es_beats_grpo_at_large_k"]["crossover"]["es"]["k"] else set()
    )
    assert (out / "pass_at_k_groups.png").stat().st_size > 1000  # the groups' curves with their bands
    claimed = (out / "report.md").read_text().split("## Claims (`tiny` in the claims file)")[1]
    assert "`pass_at_k_groups.png`" in claimed and "| `es_beats_grpo_at_large_k` | **" in claimed
    assert "Parameter geometry" not in (out / "report.md").read_text()
    # A cache is reused whatever dtype `auto` served; a dtype asked for by name is sampled in that very one.
    recorded_dtype = json.loads(cached.read_text())["inference"]["dtype"]
    other = "bfloat16" if recorded_dtype == "float32" else "float32"
    assert main([*args, "--no-geometry", "--set", f"model.dtype={other}"]) == 0
    assert cached.stat().st_mtime_ns != before and json.loads(cached.read_text())["inference"]["dtype"] == other
    before = cached.stat().st_mtime_ns
    assert main([*args, "--no-geometry", "--set", f"model.dtype={other}"]) == 0
    assert main([*args, "--no-geometry"]) == 0
    assert cached.stat().st_mtime_ns == before
    assert f"Every entry sampled with hf on cpu, {other}." in (out / "report.md").read_text()
    # Other problems (a config override) are evaluated again, never served from the cache made for these.
    assert json.loads(cached.read_text())["dataset"]["synthetic_difficulty"] == 2
    assert main([*args, "--no-geometry", "--set", "task.synthetic_difficulty=1"]) == 0
    assert json.loads(cached.read_text())["dataset"]["synthetic_difficulty"] == 1
    # The caches outlive a GRPO run's weights: evaluated (and its geometry measured) where it trained, a published
    # copy of its numbers without model/ is compared through them; without a cache it is a clear error.
    level_one = ["--set", "task.synthetic_difficulty=1"]
    grpo_only = [args[0], f"grpo={grpo}", *args[4:], *level_one, "--evaluate-only"]
    assert main(grpo_only) == 0 and (out / "evals" / "grpo" / "geometry.json").is_file()
    published = tmp_path / "published-grpo"
    published.mkdir()
    for name in ("config.yaml", "summary.json", "metrics.jsonl", "trl_log.jsonl"):
        shutil.copy2(grpo / name, published / name)
    grpo_cached = out / "evals" / "grpo" / "results.json"
    before = grpo_cached.stat().st_mtime_ns
    assert main([*args[:3], f"grpo={published}", *args[4:], *level_one]) == 0
    assert grpo_cached.stat().st_mtime_ns == before
    document = json.loads((out / "compare.json").read_text())
    assert {e["label"]: e for e in document["entries"]}["grpo"]["geometry"]["relative_l2"] > 0
    assert main([args[0], f"grpo={published}", "--out", str(tmp_path / "r3"), *args[6:]]) == 2
    assert "without its weights" in capsys.readouterr().err
    # Other weights under a cached label are evaluated again, never served from that label's cache.
    assert main([args[0], f"grpo={es}", *args[4:], *level_one, "--evaluate-only", "--no-geometry"]) == 0
    assert grpo_cached.stat().st_mtime_ns != before
    assert json.loads((out / "evals" / "grpo" / "entry.json").read_text())["path"] == str(es)
    # An eval folder is an entry as it is.
    assert (
        main(["compare", f"a={out / 'evals' / 'base'}", f"b={out / 'evals' / 'grpo'}", "--out", str(tmp_path / "r2")])
        == 0
    )
    assert "| b | " in (tmp_path / "r2" / "report.md").read_text()


def test_a_run_started_from_another_counts_the_whole_chain(tmp_path, monkeypatch):
    """The GRPO half of a hybrid started from an ES run's export: compare charges it both halves' wall time,
    completions and tokens, and measures its geometry from the ES run's base model."""
    from seedcast.optimizer.config_files import load_config
    from seedcast.optimizer.run_dir import RunDirectory
    from seedcast.optimizer.run_records import IterationRecord, RunSummary
    from seedcast.studies.compare import Entry, base_model_of, training_info

    monkeypatch.chdir(tmp_path)  # an export names its run relative to where it was made, as the bench does

    def run(name: str, model: str, method: str, seconds: float, completions: int, tokens: int) -> RunDirectory:
        directory = RunDirectory.create(name, load_config(overrides=[f"model.name={model}"]), update_log=True)
        if method == "grpo":
            (directory.path / "model").mkdir()
            (directory.path / "model" / "config.json").write_text("{}")
        directory.append_metrics(
            IterationRecord(iteration=1, step=1, seconds=seconds, completions=completions, completion_tokens=tokens)
        )
        directory.write_summary(RunSummary(method=method, steps=1, wall_seconds=seconds, completion_tokens=tokens))
        return directory

    run("es-half", "base-model-folder", "es", 700.0, 12_288, 90_000)
    export = tmp_path / "hybrid" / "init-model"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    (export / "seedcast_export.json").write_text(json.dumps({"run_dir": "es-half", "steps": 1}))
    run("hybrid", str(export.resolve()), "grpo", 750.0, 1_280, 15_000)
    run("plain", "base-model-folder", "grpo", 1_500.0, 2_560, 30_000)

    hybrid = training_info(Entry(label="hybrid@0", path="hybrid", kind="grpo"))
    assert hybrid["wall_seconds"] == 1_450.0 and hybrid["completions"] == 13_568
    assert hybrid["completion_tokens"] == 105_000 and hybrid["started_from"] == ["es-half"]
    assert base_model_of(Entry(label="hybrid@0", path="hybrid", kind="grpo")) == "base-model-folder"
    plain = training_info(Entry(label="grpo@0", path="plain", kind="grpo"))
    assert plain["wall_seconds"] == 1_500.0 and "started_from" not in plain
    assert base_model_of(Entry(label="grpo@0", path="plain", kind="grpo")) == "base-model-folder"
    # A run started from a GRPO run's model/ folder (an ES run here) is charged that run too, and the chain
    # goes on through it to the base.
    run("continued", str(tmp_path / "plain" / "model"), "es", 400.0, 5_120, 20_000)
    continued = training_info(Entry(label="continued", path="continued", kind="es"))
    assert continued["wall_seconds"] == 1_900.0 and continued["completions"] == 7_680
    assert continued["started_from"] == [str(tmp_path / "plain")]  # the path as the run recorded it
    assert base_model_of(Entry(label="continued", path="continued", kind="es")) == "base-model-folder"
    # Copied elsewhere (a fresh checkout of published runs), the hybrid still finds its first half: the
    # export it recorded by absolute path is its own init-model/ folder.
    shutil.copytree(tmp_path / "hybrid", tmp_path / "elsewhere" / "hybrid")
    shutil.rmtree(tmp_path / "hybrid")
    moved = training_info(Entry(label="hybrid@0", path="elsewhere/hybrid", kind="grpo"))
    assert moved["wall_seconds"] == 1_450.0 and moved["started_from"] == ["es-half"]
    (tmp_path / "es-half" / "updates.jsonl").unlink()  # the first half is gone: only the run's own numbers
    assert training_info(Entry(label="hybrid@0", path="elsewhere/hybrid", kind="grpo"))["wall_seconds"] == 750.0


def test_the_report_warns_when_entries_were_sampled_differently():
    from seedcast.studies.compare import Entry
    from seedcast.studies.report import inference_note

    def entry(label: str, dtype: str | None) -> Entry:
        inference = {"backend": "hf", "device": "cpu", "dtype": dtype} if dtype else None
        return Entry(label=label, path=label, kind="eval", results={"inference": inference})

    assert inference_note([entry("a", "float32"), entry("b", "float32")]) == [
        "Every entry sampled with hf on cpu, float32.",
        "",
    ]
    mixed = inference_note([entry("a", "float32"), entry("b", "bfloat16"), entry("c", None)])
    assert "a: hf on cpu, float32; b: hf on cpu, bfloat16; c: unrecorded" in mixed[0]
    assert inference_note([entry("a", None)]) == []  # evaluations made before it was recorded
