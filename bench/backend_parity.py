"""Greedy parity of the hf and vllm backends: same model, same seed, same prompts; how often do the
outputs and rewards agree, and where do they first differ?

Both backends load in this process (run it in the vllm environment, `make setup-vllm`). For each
weight state (the base, then the perturbations given by --perturb) both generate greedily and the
script reports the share of identical completions, of identical rewards, and the mean position of
the first differing token where they differ. bf16 kernels differ between transformers and vLLM, so
near-ties in the logits can flip a greedy choice; a wrong noise mapping would instead make nearly
every perturbed completion differ. Prints a table and writes JSON.

    python bench/backend_parity.py                                  # bundled model, synthetic + GSM8K
    python bench/backend_parity.py --prompts 64 --perturb 1:0.001,2:0.003 --json parity.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from seedcast.evaluators.base import ScoredSample
from seedcast.evaluators.datasets import DatasetSpec, load_problems
from seedcast.evaluators.gsm8k import GSM8K_INSTRUCTION
from seedcast.evaluators.registry import load_evaluator
from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.model_source import BUNDLED_MODEL

DEFAULT_GSM8K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gsm8k" / "test.jsonl"


def prompt_sets(count: int, gsm8k_path: Path) -> dict[str, tuple[list[str], list[str], str, int]]:
    """name -> (prompts, references, evaluator, max new tokens)."""
    synthetic = synthetic_problems(count, 2, 1)
    sets = {
        "synthetic": (
            [f"{p.prompt}\n\n{SYNTHETIC_INSTRUCTION}" for p in synthetic],
            [p.reference for p in synthetic],
            "synthetic",
            32,
        )
    }
    if gsm8k_path.is_file():
        gsm8k = load_problems(DatasetSpec(kind="gsm8k", path=str(gsm8k_path), limit=count))
        sets["gsm8k"] = (
            [f"{p.prompt}\n\n{GSM8K_INSTRUCTION}" for p in gsm8k],
            [p.reference for p in gsm8k],
            "gsm8k",
            128,
        )
    return sets


def first_difference(a: str, b: str, tokenizer) -> int | None:
    """Index of the first differing token of two completions (None when equal)."""
    if a == b:
        return None
    left, right = (tokenizer(text, add_special_tokens=False)["input_ids"] for text in (a, b))
    return next((i for i, (x, y) in enumerate(zip(left, right, strict=False)) if x != y), min(len(left), len(right)))


def compare(hf, vllm, sets, label: str) -> list[dict]:
    rows = []
    for name, (prompts, references, evaluator_name, tokens) in sets.items():
        evaluator = load_evaluator(evaluator_name)
        sampling = Sampling(temperature=0.0, max_new_tokens=tokens)
        hf_out = [group[0].text for group in hf.generate(prompts, sampling)]
        vllm_out = [group[0].text for group in vllm.generate(prompts, sampling)]
        hf_rewards, vllm_rewards = (
            evaluator.score_batch([ScoredSample(p, c, r) for p, c, r in zip(prompts, out, references, strict=True)])
            for out in (hf_out, vllm_out)
        )
        diverged = [
            d for a, b in zip(hf_out, vllm_out, strict=True) if (d := first_difference(a, b, hf.tokenizer)) is not None
        ]
        rows.append(
            {
                "weights": label,
                "set": name,
                "prompts": len(prompts),
                "max_new_tokens": tokens,
                "identical_completions": sum(a == b for a, b in zip(hf_out, vllm_out, strict=True)) / len(prompts),
                "identical_rewards": sum(a == b for a, b in zip(hf_rewards, vllm_rewards, strict=True)) / len(prompts),
                "hf_mean_reward": _mean(hf_rewards),
                "vllm_mean_reward": _mean(vllm_rewards),
                "mean_first_difference_token": sum(diverged) / len(diverged) if diverged else None,
            }
        )
    return rows


def _mean(values: list) -> float:
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=BUNDLED_MODEL, help="model spec (default: the bundled SmolLM2-135M)")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per set (default: 32)")
    parser.add_argument(
        "--perturb",
        default="1:0.001,2:0.001",
        help="seed:sigma perturbations to compare besides the base (default: 1:0.001,2:0.001)",
    )
    parser.add_argument("--gsm8k", type=Path, default=DEFAULT_GSM8K, help="GSM8K test file (skipped when absent)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for each backend")
    parser.add_argument(
        "--dtype",
        default="bfloat16",
        choices=["bfloat16", "float32"],
        help="inference dtype of both backends (default: bfloat16)",
    )
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()

    from seedcast.inference_server.backends.hf import HFBackend
    from seedcast.inference_server.backends.vllm_engine import VLLMBackend

    vllm = VLLMBackend(args.model, device="cpu", dtype=args.dtype, threads=args.threads)
    hf = HFBackend(args.model, device="cpu", dtype=args.dtype, threads=args.threads)
    assert hf.fingerprint() == vllm.fingerprint(), "the two backends loaded different master weights"
    sets = prompt_sets(args.prompts, args.gsm8k)
    rows = compare(hf, vllm, sets, "base")
    for item in filter(None, args.perturb.split(",")):
        seed, sigma = item.split(":")
        for backend in (hf, vllm):
            backend.perturb(int(seed), float(sigma), 1)
        rows += compare(hf, vllm, sets, f"seed {seed}, σ {sigma}")
        for backend in (hf, vllm):
            backend.restore()

    print(
        f"{'weights':<20}{'set':<11}{'same text':>10}{'same reward':>12}{'hf reward':>10}{'vllm reward':>12}"
        f"{'1st diff tok':>13}"
    )
    for row in rows:
        first = row["mean_first_difference_token"]
        print(
            f"{row['weights']:<20}{row['set']:<11}{row['identical_completions']:>10.3f}"
            f"{row['identical_rewards']:>12.3f}{row['hf_mean_reward']:>10.3f}{row['vllm_mean_reward']:>12.3f}"
            f"{'-' if first is None else f'{first:.1f}':>13}"
        )
    if args.json:
        result = {"model": args.model, "dtype": args.dtype, "rows": rows}
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
