"""ES overhead per member: one member through the gRPC server (perturb + generate + score + restore)
divided by generating the same prompts with the same backend and sampling, nothing else.

Members come in mirrored pairs (+ε then −ε, the default ES population), each pair timed against two
plain generations; with `--pair-cache` the server draws the noise once per pair.

Both are measured in one process, interleaved, and the median of the ratios is reported, so load
from elsewhere on the machine affects both sides alike. Prints a table and writes JSON.

    python bench/member_overhead.py                           # bundled SmolLM2-135M, 32 prompts
    python bench/member_overhead.py --pair-cache              # one noise draw per mirrored pair
    python bench/member_overhead.py --noise table             # perturb from the shared noise table
    python bench/member_overhead.py --gsm8k ../shared/data/gsm8k/test.jsonl --max-new-tokens 128  # longer answers
    python bench/member_overhead.py --model DIR --prompts 64 --max-new-tokens 32 --repeats 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from seedcast.evaluators.datasets import DatasetSpec, load_problems
from seedcast.evaluators.gsm8k import GSM8K_INSTRUCTION
from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.backends.base import Backend, Sampling
from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.inference_server.server import start_server
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field


async def measure(
    backend: Backend, prompts: list[pb.Problem], evaluator: str, sampling: pb.SamplingParams, repeats: int
) -> list:
    running = await start_server(backend, "127.0.0.1", 0)
    # The reference runs on one long-lived thread, as the server's backend work does, so both sides run the
    # same way (each thread that calls into torch gets its own OpenMP team).
    reference_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reference")
    loop = asyncio.get_running_loop()
    plain = Sampling(
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        max_new_tokens=sampling.max_new_tokens,
        samples_per_prompt=sampling.samples_per_prompt,
        seed=sampling.seed,
    )
    rows = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stream = pb_grpc.InferenceServerStub(channel).Evaluate()
            await stream.write(
                pb.EvaluateRequest(batch=pb.PromptBatch(iteration=0, problems=prompts, evaluator=evaluator))
            )
            texts = [p.prompt for p in prompts]
            for repeat in range(repeats + 1):  # the first round warms up and is not counted
                generate_only, member, timings, tokens = 0.0, 0.0, [], 0
                for sign in (1, -1):
                    # Servers defer restoring until the weights are next read, and skip it when the next member's
                    # perturbation overwrites them (the steady state of a server). Write it now, outside the
                    # timing, so the reference is generation alone.
                    await loop.run_in_executor(reference_thread, backend.sync_weights)
                    started = time.perf_counter()
                    await loop.run_in_executor(reference_thread, backend.generate, texts, plain)
                    generate_only += time.perf_counter() - started
                    started = time.perf_counter()
                    await stream.write(
                        pb.EvaluateRequest(
                            task=pb.MemberTask(
                                iteration=0,
                                member=2 * repeat + (sign < 0),
                                seed=1000 + repeat,
                                sign=sign,
                                sigma=5e-3,
                                sampling=sampling,
                            )
                        )
                    )
                    answer = await stream.read()
                    member += time.perf_counter() - started
                    timings.append(answer.result.timings)
                    tokens += sum(answer.result.completion_tokens)
                if repeat:
                    phases = {
                        f"{phase}_s": sum(getattr(t, phase_field(phase)) for t in timings) / 2
                        for phase in MEMBER_PHASES
                    }
                    # The same ratio from the server's own phase timings (no gRPC, no client): steadier.
                    rows.append(
                        {
                            "generate_only_s": generate_only / 2,
                            "member_s": member / 2,
                            "tokens": tokens / 2,
                            "ratio": member / generate_only,
                            "server_ratio": sum(phases.values()) / phases["generate_s"],
                            **phases,
                        }
                    )
            await stream.done_writing()
    finally:
        reference_thread.shutdown()
        await running.stop(0)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="inference backend (default: hf)")
    parser.add_argument("--model", default=BUNDLED_MODEL, help="model spec (default: the bundled SmolLM2-135M)")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per member (default: 32)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="tokens per completion (default: 16)")
    parser.add_argument("--repeats", type=int, default=5, help="measured rounds (default: 5)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--dtype", default="auto", help="inference dtype (default: auto)")
    parser.add_argument(
        "--pair-cache", action="store_true", help="one noise draw per mirrored pair (serve --pair-cache)"
    )
    parser.add_argument(
        "--gsm8k",
        default=None,
        metavar="JSONL",
        help="use the first --prompts GSM8K problems of this file (long answers) instead of the "
        "synthetic task (answers of a few tokens)",
    )
    parser.add_argument(
        "--noise",
        default="gaussian",
        choices=["gaussian", "table"],
        help="noise kind (serve --noise; default: gaussian)",
    )
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    extra = {"pair_cache": args.pair_cache}  # on or off as asked, never the auto default
    backend = create_backend(
        args.backend, args.model, device="cpu", dtype=args.dtype, threads=args.threads, noise=args.noise, **extra
    )
    if args.gsm8k:
        source, instruction, evaluator = (
            load_problems(DatasetSpec("gsm8k", args.gsm8k, limit=args.prompts)),
            GSM8K_INSTRUCTION,
            "gsm8k",
        )
    else:
        source, instruction, evaluator = synthetic_problems(args.prompts, 2, 0), SYNTHETIC_INSTRUCTION, "synthetic"
    problems = [pb.Problem(prompt=f"{p.prompt}\n\n{instruction}", reference=p.reference) for p in source]
    sampling = pb.SamplingParams(
        temperature=0.0, top_p=1.0, max_new_tokens=args.max_new_tokens, samples_per_prompt=1, seed=0
    )
    rows = asyncio.run(measure(backend, problems, evaluator, sampling, args.repeats))
    print("per member, averaged over a mirrored pair")
    print(
        f"{'round':>5}{'generate only s':>17}{'member s':>10}{'ratio':>8}{'perturb s':>11}{'restore s':>11}"
        f"{'server ratio':>14}"
    )
    for index, row in enumerate(rows, 1):
        print(
            f"{index:>5}{row['generate_only_s']:>17.3f}{row['member_s']:>10.3f}{row['ratio']:>8.3f}"
            f"{row['perturb_s']:>11.3f}{row['restore_s']:>11.3f}{row['server_ratio']:>14.3f}"
        )
    median = statistics.median(row["ratio"] for row in rows)
    server_median = statistics.median(row["server_ratio"] for row in rows)
    info = backend.info()
    member_s = statistics.median(row["member_s"] for row in rows)
    tokens_per_s = statistics.median(row["tokens"] / row["member_s"] for row in rows)
    print(f"\n{info.backend}: median member {member_s:.3f} s, {tokens_per_s:.0f} generated tokens/s through the server")
    print(
        f"median ES overhead ratio: {median:.3f} ({info.model}, {info.dtype}, {args.prompts} prompts, "
        f"{'GSM8K' if args.gsm8k else 'synthetic'}, {args.max_new_tokens} new tokens, "
        f"pair cache {'on' if args.pair_cache else 'off'}, {args.noise} noise)"
    )
    print(
        f"median from the server's own timings (perturb + generate + score + restore) / generate: {server_median:.3f}"
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "backend": info.backend,
                    "model": info.model,
                    "dtype": info.dtype,
                    "pair_cache": args.pair_cache,
                    "noise": args.noise,
                    "median_ratio": median,
                    "median_server_ratio": server_median,
                    "median_member_s": member_s,
                    "median_tokens_per_s": tokens_per_s,
                    "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                    "rows": rows,
                },
                handle,
                indent=2,
            )


if __name__ == "__main__":
    main()
