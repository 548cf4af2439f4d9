"""`seedcast eval`: token entropy recorded while generating, against its definition and a known distribution, and an
end-to-end run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from seedcast.cli import main
from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.backends.entropy import GenerationEntropy
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.studies.evaluate import EvalOptions, ProblemOutcome, final_answer, summarize


def test_entropy_of_a_uniform_next_token_distribution_is_log_vocab(tiny_model_dir):
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=1)
    with torch.no_grad():
        backend.model.get_output_embeddings().weight.zero_()  # all logits 0: exactly uniform
    completions = backend.generate(
        ["What is 1 + 1?"], Sampling(temperature=1.0, max_new_tokens=5, seed=1), with_entropy=True
    )[0]
    vocab = backend.model.config.vocab_size
    assert completions[0].mean_entropy == pytest.approx(math.log(vocab), abs=1e-4)


def _one_pass_entropies(model, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    """The definition: one forward pass over prompt + completion, alone (no padding), token j's distribution at
    position len(prompt) + j - 1, temperature 1."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt_ids + completion_ids])).logits[0].float()
    log_probs = torch.log_softmax(logits[len(prompt_ids) - 1 : len(prompt_ids) + len(completion_ids) - 1], dim=-1)
    return (-(log_probs.exp() * log_probs).sum(-1)).tolist()


def test_entropy_recorded_while_generating_equals_one_forward_pass_over_prompt_and_completion(tiny_model_dir):
    """Batched, left-padded, sampled at T = 0.7 with top-p: the recorded entropy is still the policy's own (T = 1,
    no top-p), token by token, as a separate forward pass over each row alone measures it."""
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=1)
    texts = backend.chat_texts(["Hi", "A much longer prompt that needs left padding in the batch"])
    encoded = backend.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(3)
    with torch.no_grad(), GenerationEntropy(backend.model) as recorder:
        output = backend.model.generate(
            **encoded, do_sample=True, temperature=0.7, top_p=0.9, max_new_tokens=6,
            pad_token_id=backend.tokenizer.pad_token_id,
        )  # fmt: skip
    prompt_length = encoded["input_ids"].shape[1]
    for row in range(len(texts)):
        prompt_ids = encoded["input_ids"][row][encoded["attention_mask"][row].bool()].tolist()
        completion_ids = output[row, prompt_length:].tolist()
        expected = _one_pass_entropies(backend.model, prompt_ids, completion_ids)
        recorded = torch.stack(recorder.steps, dim=1)[row, : len(completion_ids)].tolist()
        assert recorded == pytest.approx(expected, abs=1e-4)
        assert recorder.means([len(completion_ids)] * len(texts))[row] == pytest.approx(sum(expected) / 6, abs=1e-4)
    assert recorder.means([2, 6])[0] == pytest.approx(float(torch.stack(recorder.steps[:2])[:, 0].mean()))
    with pytest.raises(RuntimeError, match="forward calls"):
        recorder.means([len(recorder.steps) + 1, 1])


def test_recording_entropy_leaves_the_samples_unchanged(tiny_model_dir):
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32", threads=1)
    sampling = Sampling(temperature=1.0, max_new_tokens=6, samples_per_prompt=3, seed=4)
    prompts = ["Hi", "A much longer prompt that needs left padding in the batch"]
    plain = backend.generate(prompts, sampling)
    with_entropy = backend.generate(prompts, sampling, with_entropy=True)
    assert [[c.text for c in group] for group in with_entropy] == [[c.text for c in group] for group in plain]
    assert all(c.mean_entropy is not None and c.mean_entropy > 0 for group in with_entropy for c in group)
    assert not backend.model._forward_hooks  # the recorder is gone after generate


def test_final_answer_extraction():
    assert final_answer("so \\boxed{ 12 } maybe 13") == "12"
    assert final_answer("It is 1,234.") == "1234"
    assert final_answer("no answer") is None


def test_finished_accuracy_counts_only_answers_the_budget_did_not_cut():
    def outcome(rewards, truncated):
        n = len(rewards)
        return ProblemOutcome(rewards, [4] * n, truncated, [1.0] * n, ["1"] * n)

    outcomes = [
        outcome([1.0, 0.0, 0.0, 0.0], [False, False, True, True]),  # finished: 1 right of 2
        outcome([0.0, 0.0, 1.0, float("nan")], [True, True, False, False]),  # finished: 1 right, 1 unscorable
    ]
    results = summarize(outcomes, EvalOptions(n=4, ks=[1, 4]))
    assert results["finished_samples"] == 3 and results["finished_accuracy"] == 2 / 3
    assert results["truncation_rate"] == 0.5
    assert results["pass_at_k"]["1"]["mean"] == 0.25  # pass@k still counts every sample
    assert summarize([outcome([1.0], [True])], EvalOptions(n=1, ks=[1]))["finished_accuracy"] is None


def test_eval_end_to_end(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "eval"
    code = main(
        [
            "eval",
            "--model",
            tiny_model_dir,
            "--limit",
            "6",
            "--n",
            "8",
            "--k",
            "1,2,4,8",
            "--max-tokens",
            "6",
            "--out",
            str(out),
            "task.evaluator=tests.tiny_model:contains_digit_reward",
            "fleet.threads_per_server=1",
        ]
    )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    means = [results["pass_at_k"][k]["mean"] for k in ("1", "2", "4", "8")]
    assert means == sorted(means) and 0.0 < means[-1] <= 1.0
    for row in results["pass_at_k"].values():
        assert row["ci95"][0] <= row["mean"] <= row["ci95"][1]
    assert results["problems"] == 6 and results["samples_per_problem"] == 8
    assert abs(results["mean_token_entropy"] - math.log(400)) < 0.5  # a random model is close to uniform
    assert 0 <= results["truncation_rate"] <= 1 and results["mean_completion_tokens"] <= 6
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 6 and len(json.loads(lines[0])["completions"]) == 8
    assert json.loads(lines[0])["problem_id"].startswith("synthetic-")
    assert (out / "pass_at_k.png").stat().st_size > 1000
    assert "pass@8=" in capsys.readouterr().out


def test_sample_calls_of_a_failed_server_go_to_another():
    import asyncio

    from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
    from seedcast.inference_server.server import start_server
    from seedcast.optimizer.fleet.client import ServerClient
    from seedcast.proto import seedcast_pb2 as pb
    from seedcast.studies.evaluate import sample_all

    request = pb.SampleRequest(
        problems=[pb.Problem(prompt="What is 2 + 2?", reference="4")],
        evaluator="synthetic",
        sampling=pb.SamplingParams(top_p=1, max_new_tokens=2, samples_per_prompt=3),
    )

    async def main():
        servers = [await start_server(SimulatedLatencyTestBackend(0.05), "127.0.0.1", 0) for _ in range(2)]
        clients = [ServerClient(f"127.0.0.1:{s.port}") for s in servers]

        async def stop_second():
            await asyncio.sleep(0.12)
            await servers[1].stop(0)

        try:
            replies, _ = await asyncio.gather(sample_all(clients, [request] * 12, show_progress=False), stop_second())
        finally:
            for client in clients:
                await client.close()
            await servers[0].stop(0)
        return replies

    replies = asyncio.run(main())
    assert len(replies) == 12 and all(len(reply.problems[0].completions) == 3 for reply in replies)


def test_held_out_problems_are_disjoint_from_every_excluded_training_seed():
    from seedcast.evaluators.datasets import load_problems
    from seedcast.studies.evaluate import eval_config, held_out_problems

    config = eval_config("smollm2-135m-instruct", task="synthetic", limit=128, seed=1_000_003)
    kept, dropped = held_out_problems(config, [0, 1, 2])
    training = {p.prompt for seed in (0, 1, 2) for p in load_problems(config.task.dataset_spec(seed))}
    assert len(kept) == 128 and dropped > 0  # two-digit sums repeat across seeds: some had to go
    assert not {p.prompt for p in kept} & training
    unfiltered, none_dropped = held_out_problems(config, [])
    assert none_dropped == 0 and len(unfiltered) == 128 and unfiltered != kept


def test_held_out_countdown_problems_differ_from_training_ones_up_to_the_order_of_their_numbers():
    from dataclasses import replace

    from seedcast.evaluators.countdown import countdown_key
    from seedcast.evaluators.datasets import DatasetError, load_problems
    from seedcast.studies.evaluate import eval_config, held_out_problems

    def config(level: int):
        overrides = [f"task.countdown_difficulty={level}"]
        return eval_config("smollm2-135m-instruct", task="countdown", limit=128, seed=2_000_003, overrides=overrides)

    kept, dropped = held_out_problems(config(8), [0, 1, 2])
    streams = [replace(config(8).task.dataset_spec(seed), limit=None) for seed in (0, 1, 2)]  # all they could draw
    training = [p for spec in streams for p in load_problems(spec)]
    keys = [countdown_key(p) for p in kept]
    assert len(kept) == 128 and len(set(keys)) == 128  # each held-out problem once
    training_keys = {countdown_key(p) for p in training}
    assert not set(keys) & training_keys and dropped > 0
    # By prompt alone, some would pass as held out: "7, 3: make 21" against a training "3, 7: make 21".
    stream = held_out_problems(config(8), [])[0]
    training_prompts = {p.prompt for p in training}
    assert any(p.prompt not in training_prompts and countdown_key(p) in training_keys for p in stream)
    # Level 7 (two numbers up to 25) has too few problems left: a clear error, not a short set.
    with pytest.raises(DatasetError, match="fewer than the 128 asked for"):
        held_out_problems(config(7), [0, 1, 2])
