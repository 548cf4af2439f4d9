"""The GRPO baseline on TRL: two real optimizer steps on the tiny model, and the pieces it is made of."""

from __future__ import annotations

import json
import math

import pytest
import torch

from seedcast.cli import main
from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.datasets import load_problems
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.eval_set import prompt_text
from seedcast.optimizer.run_kinds import run_kind
from seedcast.studies.geometry import load_weights
from seedcast.studies.grpo import EvaluatorReward, _dataset, micro_batch_size

TINY_TASK = [
    "grpo.steps=2",
    "batch_size=2",
    "eval_every=1",
    "eval_size=4",
    "task.synthetic_size=50",
    "task.evaluator=tests.tiny_model:digit_fraction_reward",
    "sampling.max_new_tokens=6",
    "grpo.group_size=4",
    "grpo.learning_rate=0.05",
]


def test_two_grpo_steps_write_a_run_that_eval_and_compare_can_read(tmp_path, tiny_model_dir, capsys):
    run = tmp_path / "grpo"
    assert main(["grpo", "--run-dir", str(run), "--no-progress", f"model.name={tiny_model_dir}", *TINY_TASK]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert "eval_reward" in rows[0] and "reward_mean" not in rows[0]  # the base model's eval comes first
    for row in rows[1:]:
        assert row["completions"] == 2 * 4  # batch_size problems x group_size samples per step
        assert 0 < row["completion_tokens"] <= 8 * 6
        assert 0.0 <= row["reward_mean"] <= 1.0 and not math.isnan(row["eval_reward"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["method"] == "grpo" and summary["steps"] == 2
    assert summary["peak_rss_bytes"] > 50 * 2**20 and summary["wall_seconds"] > 0
    assert summary["completion_tokens"] == sum(r.get("completion_tokens", 0) for r in rows)
    assert (run / "trl_log.jsonl").read_text().count("\n") >= 2
    assert not (run / "updates.jsonl").exists() and run_kind(run) == "grpo"
    base, trained = load_weights(tiny_model_dir), load_weights(run)
    assert base.keys() == trained.keys()
    assert any(not torch.equal(base[name], trained[name]) for name in base)  # the optimizer really stepped
    assert "finished 2 GRPO steps" in capsys.readouterr().out
    from huggingface_hub import ModelCard

    card = ModelCard.load(run / "model" / "README.md")  # described as an ES export is (test_export_card.py)
    assert card.data.pipeline_tag == "text-generation" and {"seedcast", "grpo", "trl"} <= set(card.data.tags)
    assert card.data.eval_results[0].metric_value == pytest.approx(rows[-1]["eval_reward"], abs=1e-4)
    assert "| steps | 2 |" in card.content and str(tmp_path) not in card.content


def test_grpo_trained_again_from_the_same_command_gives_the_same_weights_bit_for_bit(tmp_path, tiny_model_dir):
    """What lets the bench pause an evaluation of retrained weights and go on from weights trained again in a later
    session (bench/es_vs_grpo_retrain.py): on one machine, a seeded GRPO run is reproducible to the last bit."""
    weights = []
    for name in ("first", "again"):
        run = tmp_path / name
        assert main(["grpo", "--run-dir", str(run), "--no-progress", f"model.name={tiny_model_dir}", *TINY_TASK]) == 0
        weights.append(load_weights(run))
    base = load_weights(tiny_model_dir)
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    assert any(not torch.equal(weights[0][name], base[name]) for name in weights[0])  # it really trained


def test_grpo_prompts_are_exactly_what_the_servers_generate_from(tiny_model_dir):
    config = load_config(
        overrides=[f"model.name={tiny_model_dir}", "task.synthetic_size=5", "task.system_prompt=be brief"]
    )
    backend = HFBackend(tiny_model_dir, dtype="float32")
    problems = load_problems(config.task.dataset_spec(config.seed))
    dataset = _dataset(problems, backend.tokenizer, config)
    served = backend.chat_texts([prompt_text(p, config.task.instruction_text()) for p in problems], "be brief")
    assert dataset["prompt"] == served and dataset["reference"] == [p.reference for p in problems]


def test_evaluator_reward_passes_references_and_keeps_unscorable_samples_none():
    reward = EvaluatorReward("synthetic")
    rewards = reward(
        prompts=["p", "p", "p"],
        completions=["The answer is 7", "8", "no number"],
        reference=["7", "7", "7"],
        completion_ids=[[1, 2], [3], [4, 5, 6]],
    )
    expected = reward.evaluator.score_batch([ScoredSample("p", c, "7") for c in ["The answer is 7", "8", "no number"]])
    assert rewards == expected and rewards[0] == 1.0 and rewards[1] == 0.0
    tally = reward.tally.take()
    assert tally.completions == 3 and tally.tokens == 6
    assert tally.rewards == [r for r in expected if r is not None]
    assert reward.tally.completions == 0  # take() starts a new tally


def test_micro_batch_size_divides_the_step():
    assert micro_batch_size(load_config(overrides=["batch_size=32", "grpo.group_size=8"])) == 16
    assert micro_batch_size(load_config(overrides=["batch_size=3", "grpo.group_size=3"])) == 9
    chosen = load_config(overrides=["batch_size=2", "grpo.group_size=4", "grpo.micro_batch_size=4"])
    assert micro_batch_size(chosen) == 4
    with pytest.raises(ConfigError, match="does not divide"):
        micro_batch_size(load_config(overrides=["batch_size=2", "grpo.group_size=4", "grpo.micro_batch_size=3"]))


def test_hybrid_es_then_grpo_then_es(tmp_path, tiny_model_dir):
    """ES → GRPO (the ES run is exported to the new run's init-model) and GRPO → ES."""
    es = tmp_path / "es"
    es_args = [
        "iterations=1",
        "batch_size=2",
        "eval_every=0",
        "task.synthetic_size=50",
        "es.population=2",
        "es.sigma=0.05",
        "es.learning_rate=0.05",
        "task.evaluator=tests.tiny_model:digit_fraction_reward",
        "sampling.max_new_tokens=4",
        "sampling.temperature=1.0",
        "fleet.threads_per_server=1",
    ]
    assert main(["train", "--run-dir", str(es), "--no-progress", f"model.name={tiny_model_dir}", *es_args]) == 0
    grpo = tmp_path / "grpo"
    assert (
        main(
            [
                "grpo",
                "--run-dir",
                str(grpo),
                "--init-from",
                str(es),
                "--no-progress",
                *TINY_TASK,
                "grpo.steps=1",
                "eval_every=0",
            ]
        )
        == 0
    )
    init = grpo / "init-model"
    assert load_config(grpo / "config.yaml").model.name == str(init.resolve())
    es_weights, init_weights = load_weights(es), load_weights(init)
    assert all(torch.equal(es_weights[n], init_weights[n]) for n in es_weights)  # exactly the ES weights
    back = tmp_path / "es-again"
    assert main(["train", "--run-dir", str(back), "--init-from", str(grpo), "--no-progress", *es_args]) == 0
    assert load_config(back / "config.yaml").model.name == str((grpo / "model").resolve())
    assert json.loads((back / "summary.json").read_text())["peak_rss_bytes"] > 50 * 2**20


def test_init_from_something_that_is_not_a_run_is_a_clear_error(tmp_path, capsys):
    assert main(["grpo", "--run-dir", str(tmp_path / "r"), "--init-from", str(tmp_path)]) == 2
    assert "is not an ES run" in capsys.readouterr().err


def test_grpo_steps_default_to_the_es_completion_budget():
    config = load_config(overrides=["iterations=10", "es.population=16", "grpo.group_size=8"])
    assert config.grpo_steps() == 20  # 10 x 16 completions per problem = 20 x 8
    assert load_config(overrides=["grpo.steps=3"]).grpo_steps() == 3


def test_grpo_scores_with_reward_functions_and_their_columns_as_es_servers_do(tmp_path, tiny_model_dir):
    data = tmp_path / "targets.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"Say {i}.", "target": "x" * i}) + "\n" for i in range(1, 7)))
    run = tmp_path / "grpo-trl"
    task = [option for option in TINY_TASK if not option.startswith(("task.evaluator", "task.synthetic"))]
    columns = ["task.dataset=jsonl", f"task.path={data}", "task.prompt_field=prompt"]
    rewards = ["task.reward_funcs=[tests.trl_style_rewards:target_length]", "task.reward_weights=[10]"]
    command = ["grpo", "--run-dir", str(run), "--no-progress", f"model.name={tiny_model_dir}"]
    assert main([*command, *task, *columns, *rewards]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # Each reward is 10 x the length of the problem's target column, 10 to 60: the column reached the function.
    for row in rows[1:]:
        assert 10 <= row["reward_min"] <= row["reward_max"] <= 60 and row["reward_min"] % 10 == 0
    assert 10 <= rows[0]["eval_reward"] <= 60


def test_grpo_sampling_filters_reach_trls_rollouts(tmp_path, tiny_model_dir):
    # top_k = 1 leaves one token: every completion of a group is the greedy one, so every group's rewards agree,
    # which TRL logs as frac_reward_zero_std = 1 (at T = 1 without it the tiny model's groups differ).
    run = tmp_path / "grpo-top-k"
    command = ["grpo", "--run-dir", str(run), "--no-progress", f"model.name={tiny_model_dir}", *TINY_TASK]
    assert main([*command, "grpo.top_k=1", "grpo.repetition_penalty=1.3", "grpo.min_p=0.1"]) == 0
    logged = [json.loads(line) for line in (run / "trl_log.jsonl").read_text().splitlines()]
    fractions = [entry["frac_reward_zero_std"] for entry in logged if "frac_reward_zero_std" in entry]
    assert fractions and all(fraction == 1.0 for fraction in fractions)
