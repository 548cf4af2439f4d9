"""ES overhead per member: one member through the gRPC server (perturb + generate + score + restore)
divided by generating the same prompts with the same backend and sampling, nothing else.

Members come in mirrored pairs (+ε then −ε, the default ES population), each pair timed against two
plain generations; with `--pair-cache` the server draws the noise once per pair.

Both are measured in one process, interleaved, and the median of the ratios is reported, so load
from elsewhere on the machine affects both sides alike. Prints a table and writes JSON.

    python bench/member_overhead.py                           # bundled SmolLM2-135M, 32 prompts
    python bench/member_overhead.py --pair-cache              # one noise draw per mirrored pair
    python bench/member_overhead.py --model DIR --prompts 64 --max-new-tokens 32 --repeats 7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time

import grpc

from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.backends.base import Backend, Sampling
from seedcast.inference_server.model_source import BUNDLED_MODEL
from seedcast.inference_server.server import start_server
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc


async def measure(backend: Backend, prompts: list[pb.Problem], sampling: pb.SamplingParams, repeats: int) -> list:
    running = await start_server(backend, "127.0.0.1", 0)
    plain = Sampling(temperature=sampling.temperature, top_p=sampling.top_p, max_new_tokens=sampling.max_new_tokens,
                     samples_per_prompt=sampling.samples_per_prompt, seed=sampling.seed)
    rows = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stream = pb_grpc.InferenceServerStub(channel).Evaluate()
            await stream.write(pb.EvaluateRequest(batch=pb.PromptBatch(iteration=0, problems=prompts,
                                                                       evaluator="synthetic")))
            texts = [p.prompt for p in prompts]
            for repeat in range(repeats + 1):  # the first round warms up and is not counted
                generate_only, member, timings, tokens = 0.0, 0.0, [], 0
                for sign in (1, -1):
                    # A vllm server defers restoring until its next generation; write it now, outside the
                    # timing, so the reference is generation alone.
                    await asyncio.to_thread(getattr(backend, "sync_weights", lambda: None))
                    started = time.perf_counter()
                    await asyncio.to_thread(backend.generate, texts, plain)
                    generate_only += time.perf_counter() - started
                    started = time.perf_counter()
                    await stream.write(pb.EvaluateRequest(task=pb.MemberTask(
                        iteration=0, member=2 * repeat + (sign < 0), seed=1000 + repeat, sign=sign, sigma=5e-3,
                        sampling=sampling)))
                    answer = await stream.read()
                    member += time.perf_counter() - started
                    timings.append(answer.result.timings)
                    tokens += sum(answer.result.completion_tokens)
                if repeat:
                    rows.append({"generate_only_s": generate_only / 2, "member_s": member / 2, "tokens": tokens / 2,
                                 "ratio": member / generate_only,
                                 **{f"{phase}_s": sum(getattr(t, f"{phase}_seconds") for t in timings) / 2
                                    for phase in ("perturb", "generate", "score", "restore")}})
            await stream.done_writing()
    finally:
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
    parser.add_argument("--pair-cache", action="store_true",
                        help="one noise draw per mirrored pair (serve --pair-cache)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    extra = {"pair_cache": True} if args.pair_cache else {}
    backend = create_backend(args.backend, args.model, device="cpu", dtype=args.dtype, threads=args.threads, **extra)
    problems = [pb.Problem(prompt=f"{p.prompt}\n\n{SYNTHETIC_INSTRUCTION}", reference=p.reference)
                for p in synthetic_problems(args.prompts, 2, 0)]
    sampling = pb.SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=args.max_new_tokens,
                                 samples_per_prompt=1, seed=0)
    rows = asyncio.run(measure(backend, problems, sampling, args.repeats))
    print("per member, averaged over a mirrored pair")
    print(f"{'round':>5}{'generate only s':>17}{'member s':>10}{'ratio':>8}{'perturb s':>11}{'restore s':>11}")
    for index, row in enumerate(rows, 1):
        print(f"{index:>5}{row['generate_only_s']:>17.3f}{row['member_s']:>10.3f}{row['ratio']:>8.3f}"
              f"{row['perturb_s']:>11.3f}{row['restore_s']:>11.3f}")
    median = statistics.median(row["ratio"] for row in rows)
    info = backend.info()
    member_s = statistics.median(row["member_s"] for row in rows)
    tokens_per_s = statistics.median(row["tokens"] / row["member_s"] for row in rows)
    print(f"\n{info.backend}: median member {member_s:.3f} s, {tokens_per_s:.0f} generated tokens/s through the server")
    print(f"median ES overhead ratio: {median:.3f} ({info.model}, {info.dtype}, {args.prompts} prompts, "
          f"{args.max_new_tokens} new tokens, pair cache {'on' if args.pair_cache else 'off'})")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"backend": info.backend, "model": info.model, "dtype": info.dtype, "pair_cache": args.pair_cache,
                       "median_ratio": median, "median_member_s": member_s, "median_tokens_per_s": tokens_per_s,
                       "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                       "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
