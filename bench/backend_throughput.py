"""Member-evaluation throughput of the hf and vllm backends on the same model, prompts and sampling.

Each backend runs `bench/member_overhead.py` in its own process (vLLM pins its threads for the whole
process), alternating hf, vllm, hf, vllm... for --rounds rounds; each run times mirrored members
through a real gRPC server (perturb + generate + score + restore) and plain generation with the same
backend. The table gives medians over the rounds and the vllm ÷ hf ratio of generated tokens per
second through the server. Run it in the vllm environment (`make setup-vllm`). Writes JSON.

    .venv-vllm/bin/python bench/backend_throughput.py --threads 2 --prompts 32 --max-new-tokens 64
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

OVERHEAD_SCRIPT = Path(__file__).with_name("member_overhead.py")


def run_backend(backend: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "result.json"
        command = [
            sys.executable,
            str(OVERHEAD_SCRIPT),
            "--backend",
            backend,
            "--model",
            args.model,
            "--prompts",
            str(args.prompts),
            "--max-new-tokens",
            str(args.max_new_tokens),
            "--repeats",
            str(args.repeats),
            "--threads",
            str(args.threads),
            "--dtype",
            "bfloat16",
            "--json",
            str(out),
        ]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default: the bundled model)")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per member (default: 32)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per completion (default: 64)")
    parser.add_argument("--repeats", type=int, default=3, help="measured pairs per run (default: 3)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per backend, alternating (default: 2)")
    parser.add_argument("--threads", type=int, default=2, help="threads per backend (default: 2)")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args()

    results: dict[str, list[dict]] = {"hf": [], "vllm": []}
    for round_index in range(args.rounds):
        for backend in results:
            print(f"round {round_index + 1}/{args.rounds}: {backend} ...", flush=True)
            results[backend].append(run_backend(backend, args))

    summary = {}
    print(
        f"\n{'backend':<8}{'member s':>10}{'tokens/s':>10}{'generate-only s':>17}{'ES overhead':>13}"
        f"{'perturb s':>11}{'restore s':>11}{'peak RSS GiB':>14}"
    )
    for backend, runs in results.items():
        rows = [row for run in runs for row in run["rows"]]
        summary[backend] = {
            "member_s": statistics.median(r["member_s"] for r in rows),
            "tokens_per_s": statistics.median(r["tokens"] / r["member_s"] for r in rows),
            "generate_only_s": statistics.median(r["generate_only_s"] for r in rows),
            "overhead_ratio": statistics.median(r["ratio"] for r in rows),
            "perturb_s": statistics.median(r["perturb_s"] for r in rows),
            "restore_s": statistics.median(r["restore_s"] for r in rows),
            "peak_rss_gib": max(run["peak_rss_bytes"] for run in runs) / 2**30,
        }
        s = summary[backend]
        print(
            f"{backend:<8}{s['member_s']:>10.2f}{s['tokens_per_s']:>10.0f}{s['generate_only_s']:>17.2f}"
            f"{s['overhead_ratio']:>13.3f}{s['perturb_s']:>11.3f}{s['restore_s']:>11.3f}{s['peak_rss_gib']:>14.2f}"
        )
    speedup = summary["vllm"]["tokens_per_s"] / summary["hf"]["tokens_per_s"]
    print(
        f"\nvllm ÷ hf generated tokens/s through the server: {speedup:.2f} "
        f"({args.prompts} prompts, {args.max_new_tokens} new tokens, {args.threads} threads, bf16)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "summary": summary, "speedup": speedup, "runs": results}, indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
