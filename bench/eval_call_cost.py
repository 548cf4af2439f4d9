"""What one `seedcast eval` Sample call costs on the hf backend, and where its time goes.

An evaluation sends calls of `problems_per_call` problems × n samples (4 × 16 = 64 completions by default) and
asks for token entropy. This times, on the bundled model and Countdown level-8 prompts (the held-out set of
bench/es_vs_grpo.py), the same generation: without entropy, with entropy recorded while generating (what the
server does), and with the former second forward pass over prompt + completion (micro-batches of 4), then
with 4× the problems per call. Prints a table (median seconds over --repeats, completions per second) and the
largest difference between the two entropy estimates.

    python bench/eval_call_cost.py                     # about 6 min on a 2-core AVX2 CPU
    python bench/eval_call_cost.py --repeats 3 --tokens 64 --json cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from seedcast.evaluators.countdown import COUNTDOWN_INSTRUCTION, countdown_problems
from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.backends.entropy import GenerationEntropy, token_entropy
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.optimizer.eval_set import prompt_text


def one_pass_entropies(backend: HFBackend, texts: list[str], sampling: Sampling) -> tuple[list[float], list[float]]:
    """Generate, then the former estimate: a forward pass over prompt + completion in micro-batches of 4.
    Returns (one-pass means, recorded means) for the same completions."""
    encoded = backend.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(sampling.seed)
    with torch.inference_mode(), GenerationEntropy(backend.model) as recorder:
        output = backend.model.generate(
            **encoded, do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=None,
            max_new_tokens=sampling.max_new_tokens, pad_token_id=backend.tokenizer.pad_token_id,
        )  # fmt: skip
    prompt_length, eos = encoded["input_ids"].shape[1], backend.tokenizer.eos_token_id
    lengths = [row.index(eos) + 1 if eos in row else len(row) for row in output[:, prompt_length:].tolist()]
    mask = torch.zeros(output.shape[0], output.shape[1] - prompt_length, dtype=encoded["attention_mask"].dtype)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    attention = torch.cat([encoded["attention_mask"], mask], dim=1)
    means = []
    with torch.inference_mode():
        for start in range(0, output.shape[0], 4):
            logits = backend.model(input_ids=output[start : start + 4], attention_mask=attention[start : start + 4])
            entropy = token_entropy(logits.logits[:, prompt_length - 1 : -1])
            means += [float(entropy[i, :length].mean()) for i, length in enumerate(lengths[start : start + 4])]
    return means, recorder.means(lengths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=BUNDLED_MODEL)
    parser.add_argument("--n", type=int, default=16, help="samples per problem")
    parser.add_argument("--problems", type=int, default=4, help="problems per call (the eval default)")
    parser.add_argument("--tokens", type=int, default=32, help="max new tokens")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()

    backend = HFBackend(args.model)
    problems = countdown_problems(4 * args.problems, difficulty=8, seed=2_000_003)
    prompts = [prompt_text(p, COUNTDOWN_INSTRUCTION) for p in problems]
    sampling = Sampling(temperature=1.0, max_new_tokens=args.tokens, samples_per_prompt=args.n, seed=5)
    texts = [t for t in backend.chat_texts(prompts[: args.problems]) for _ in range(args.n)]

    def timed(call) -> tuple[float, object]:
        seconds, result = [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            result = call()
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds), result

    backend.generate(prompts[:1], Sampling(max_new_tokens=2))  # warm-up: the first call pays one-off costs
    rows = []
    few, many = prompts[: args.problems], prompts
    cases = [
        ("generate only", len(few), lambda: backend.generate(few, sampling)),
        ("entropy recorded while generating", len(few), lambda: backend.generate(few, sampling, with_entropy=True)),
        ("entropy by a second forward pass", len(few), lambda: one_pass_entropies(backend, texts, sampling)),
        ("recorded, 4x the problems per call", len(many), lambda: backend.generate(many, sampling, with_entropy=True)),
    ]
    difference = None
    for name, count, call in cases:
        seconds, result = timed(call)
        completions = count * args.n
        rows.append({"variant": name, "completions": completions, "seconds": seconds, "per_s": completions / seconds})
        print(f"{name:<36} {completions:>5} completions {seconds:8.1f} s {completions / seconds:7.2f} /s", flush=True)
        if name.startswith("entropy by"):
            one_pass, recorded = result
            difference = max(abs(a - b) for a, b in zip(one_pass, recorded, strict=True))
    info = backend.info()
    print(f"\nmodel {args.model}, {info.device} {info.dtype}, {torch.get_num_threads()} threads, {args.tokens} tokens")
    print(f"largest |recorded - second pass| over the {args.problems * args.n} completions: {difference:.2e} nats")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": rows, "entropy_max_difference": difference, "dtype": info.dtype}, handle, indent=2)


if __name__ == "__main__":
    main()
