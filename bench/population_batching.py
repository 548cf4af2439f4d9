"""Tokens per second of one ES iteration: members one at a time (full rank, low rank) against low-rank members
generated together in batches of G (fleet.members_per_batch), and against the limit, plain batched generation
of the same G × prompts sequences with the unperturbed model.

Every mode generates the same population (N members, mirrored pairs) on the same prompts with the same sampling,
on one backend in this process (hf, or vllm with `--backend vllm`: members batched as LoRA adapters, so its
low-rank members are those of es.lowrank_targets=linear); the modes are interleaved round by round and the median
of each is reported, so load from elsewhere on the machine affects them alike. Peak memory is measured per mode in
a fresh process (`--memory`), as a server would hold it. Prints a table and writes JSON.

    python bench/population_batching.py                                   # bundled SmolLM2-135M
    python bench/population_batching.py --population 32 --prompts 32 --groups 1 4 8 16 32 --memory
    python bench/population_batching.py --device cuda --dtype bfloat16    # on a GPU
    python bench/population_batching.py --backend vllm --groups 4 8       # vLLM multi-LoRA (the vLLM env)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
from seedcast.inference_server.backends.base import BatchMember, Sampling
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.model_source import BUNDLED_MODEL


def _members(population: int, rank: int, sigma: float) -> list[BatchMember]:
    return [BatchMember(seed=1000 + i // 2, sigma=sigma, sign=1 - 2 * (i % 2), rank=rank) for i in range(population)]


def _tokens(answers) -> int:
    return sum(c.tokens for per_prompt in answers for c in per_prompt)


def run_mode(backend: HFBackend, mode: str, group: int, args, prompts: list[str]) -> tuple[float, int]:
    """(seconds, tokens) of one iteration in `mode`."""
    sampling = Sampling(temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=7)
    tokens = 0
    started = time.perf_counter()
    if mode in ("full", "lowrank"):
        rank = 0 if mode == "full" else args.rank
        for member in _members(args.population, rank, args.sigma):
            backend.perturb(member.seed, member.sigma, member.sign, rank=rank)
            try:
                tokens += _tokens(backend.generate(prompts, sampling))
            finally:
                backend.restore()
    elif mode == "batched":
        members = _members(args.population, args.rank, args.sigma)
        for first in range(0, len(members), group):
            chunk = members[first : first + group]
            for answers in backend.generate_members(chunk, [7] * len(chunk), prompts, sampling):
                tokens += _tokens(answers)
    elif mode == "plain":
        for _ in range(0, args.population, group):
            tokens += _tokens(backend.generate(prompts * group, sampling))
    else:
        raise ValueError(mode)
    return time.perf_counter() - started, tokens


def _backend(args) -> HFBackend:
    options = {"device": args.device, "dtype": args.dtype, "threads": args.threads, "noise": args.noise}
    if args.backend == "vllm":
        from seedcast.inference_server.backends.vllm_engine import VLLMBackend

        batching = {"batch_members": max(args.groups), "batch_max_rank": args.rank}
        return VLLMBackend(args.model, **options, lowrank_targets="linear", **batching)
    return HFBackend(args.model, **options, max_batch=4096, lowrank_targets=args.lowrank_targets)


def _modes(args) -> list[tuple[str, int]]:
    return [("full", 1), ("lowrank", 1), *[("batched", g) for g in args.groups], *[("plain", g) for g in args.groups]]


def _label(mode: str, group: int, rank: int) -> str:
    return {
        "full": "full rank, one member at a time",
        "lowrank": f"low rank {rank}, one member at a time",
        "batched": f"low rank {rank}, batched G = {group}",
        "plain": f"plain batched generation, {group} × prompts (the limit)",
    }[mode]


def peak_memory(args, mode: str, group: int) -> float:
    """Peak resident MiB of a fresh process that loads the backend and runs one iteration in `mode`."""
    command = [sys.executable, __file__, "--child", mode, str(group), *sys.argv[1:]]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=BUNDLED_MODEL)
    parser.add_argument("--backend", choices=["hf", "vllm"], default="hf")
    parser.add_argument("--lowrank-targets", choices=["all", "linear"], default="all", help="hf (vllm: linear)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--noise", default="auto")
    parser.add_argument("--population", type=int, default=16)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--sigma", type=float, default=1e-3)
    parser.add_argument("--rank", type=int, default=1)
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="also measure each mode's peak memory (a process each)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    args, _ = parser.parse_known_args()
    prompts = [f"{SYNTHETIC_INSTRUCTION}\n{p.prompt}" for p in synthetic_problems(args.prompts, seed=3)]

    if args.child:  # one iteration in one mode, then the peak resident memory in MiB
        backend = _backend(args)
        run_mode(backend, args.child[0], int(args.child[1]), args, prompts)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return

    backend = _backend(args)
    run_mode(backend, "batched", args.groups[0], args, prompts)  # warm-up: first calls compile and allocate
    seconds: dict[tuple[str, int], list[float]] = {mode: [] for mode in _modes(args)}
    tokens: dict[tuple[str, int], int] = {}
    for round_index in range(args.rounds):
        for mode in _modes(args):
            elapsed, count = run_mode(backend, *mode, args, prompts)
            print(f"#   {_label(*mode, args.rank)}: {elapsed:.1f} s, {count} tokens", file=sys.stderr, flush=True)
            seconds[mode].append(elapsed)
            tokens[mode] = count
        print(f"# round {round_index + 1}/{args.rounds} done", file=sys.stderr)

    rows = []
    for mode in _modes(args):
        median = statistics.median(seconds[mode])
        rows.append({"mode": mode[0], "group": mode[1], "seconds": median, "tokens": tokens[mode]})
    for row in rows:
        row["tokens_per_second"] = row["tokens"] / row["seconds"]
    full = next(r for r in rows if r["mode"] == "full")
    limit = {r["group"]: r for r in rows if r["mode"] == "plain"}
    if args.memory:
        for row in rows:
            row["peak_mib"] = peak_memory(args, row["mode"], row["group"])

    info = backend.info()
    print(
        f"\n{info.model} on {info.backend}: {info.parameters / 1e6:.1f} M parameters, {info.device}, {info.dtype}, "
        f"{info.noise} noise, low-rank targets {info.lowrank_targets}; "
        f"population {args.population}, {args.prompts} prompts, {args.max_new_tokens} tokens, T = {args.temperature}, "
        f"rank {args.rank}; median of {args.rounds} interleaved rounds\n"
    )
    header = "| mode | iteration s | tokens/s | ÷ full rank one at a time | ÷ the limit at its G |"
    if args.memory:
        header += " peak MiB | ÷ full rank's peak |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        same_g = limit.get(row["group"]) if row["mode"] == "batched" else None
        cells = [
            _label(row["mode"], row["group"], args.rank),
            f"{row['seconds']:.2f}",
            f"{row['tokens_per_second']:.0f}",
            f"{row['tokens_per_second'] / full['tokens_per_second']:.2f}×",
            f"{row['tokens_per_second'] / same_g['tokens_per_second']:.2f}" if same_g else "",
        ]
        if args.memory:
            cells += [f"{row['peak_mib']:.0f}", f"{row['peak_mib'] / full['peak_mib']:.2f}×"]
        print("| " + " | ".join(cells) + " |")
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "info": info.__dict__, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
