"""Peak resident memory: an ES inference server vs plain inference vs TRL GRPO training, same model.

Each side runs in its own fresh process and reports its peak resident set size (VmHWM), so
nothing one side allocated counts against another:

- plain inference: load the model in the inference dtype, generate the batch (what a serving
  process needs);
- ES server: `seedcast serve` (the real gRPC server) evaluating mirrored members on the batch and
  applying one update, driven over loopback; plain, with `--pair-cache` and with `--noise table`;
- GRPO: the peak recorded by `seedcast grpo` (`summary.json`) for the same model and batch, or one
  GRPO step run here with `--grpo-steps 1`.

    python bench/memory.py --grpo-run runs/grpo         # reuse a GRPO run's measured peak
    python bench/memory.py --grpo-steps 1               # measure one GRPO step here (minutes on a CPU)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GIB = 2**30

INFERENCE_SCRIPT = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from seedcast.inference_server.model_source import resolve_model
from seedcast.inference_server.backends.devices import resolve_dtype
from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
model_spec, prompts, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
dtype = resolve_dtype("auto", torch.device("cpu"))
source = resolve_model(model_spec)
tokenizer = AutoTokenizer.from_pretrained(source.location, **source.pretrained_kwargs())
tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
tokenizer.padding_side = "left"
# Loaded straight in the inference dtype: the leanest plain-inference process, the fair baseline.
model = AutoModelForCausalLM.from_pretrained(source.location, dtype=dtype, **source.pretrained_kwargs()).eval()
texts = [tokenizer.apply_chat_template([{"role": "user", "content": f"{p.prompt} {SYNTHETIC_INSTRUCTION}"}],
                                       tokenize=False, add_generation_prompt=True)
         for p in synthetic_problems(prompts, seed=0)]
with torch.no_grad():
    encoded = tokenizer(texts, return_tensors="pt", padding=True)
    model.generate(**encoded, max_new_tokens=tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
print(json.dumps({"dtype": str(dtype)}))
"""


def peak_of(pid: int) -> int:
    """VmHWM of a live process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc status")


def plain_inference_peak(model: str, prompts: int, tokens: int) -> int:
    """Peak RSS of a process that loads the model in the inference dtype and generates the batch."""
    script = INFERENCE_SCRIPT + "\nimport os\nprint(open(f'/proc/{os.getpid()}/status').read())\n"
    output = subprocess.run(
        [sys.executable, "-c", script, model, str(prompts), str(tokens)], check=True, capture_output=True, text=True
    ).stdout
    line = next(line for line in output.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


async def es_server_peak(
    model: str, prompts: int, tokens: int, members: int, pair_cache: bool = False, noise: str = "gaussian"
) -> int:
    """Peak RSS of a real `seedcast serve` process after mirrored members and one update."""
    import grpc

    from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
    from seedcast.proto import seedcast_pb2 as pb
    from seedcast.proto import seedcast_pb2_grpc as pb_grpc

    with tempfile.TemporaryDirectory() as scratch:
        ready = Path(scratch) / "ready.json"
        command = [
            sys.executable,
            "-m",
            "seedcast.inference_server",
            "--model",
            model,
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--noise",
            noise,
            "--pair-cache" if pair_cache else "--no-pair-cache",  # not the auto default: each row is one setting
        ]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 600
            while not ready.exists():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start")
                time.sleep(0.2)
            port = json.loads(ready.read_text())["port"]
            problems = [
                pb.Problem(prompt=f"{p.prompt}\n\n{SYNTHETIC_INSTRUCTION}", reference=p.reference)
                for p in synthetic_problems(prompts, seed=0)
            ]
            sampling = pb.SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=tokens, samples_per_prompt=1)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.InferenceServerStub(channel)
                stream = stub.Evaluate()
                await stream.write(
                    pb.EvaluateRequest(batch=pb.PromptBatch(iteration=0, problems=problems, evaluator="synthetic"))
                )
                for index in range(members):
                    await stream.write(
                        pb.EvaluateRequest(
                            task=pb.MemberTask(
                                iteration=0,
                                member=index,
                                seed=100 + index // 2,
                                sign=1 if index % 2 == 0 else -1,
                                sigma=5e-3,
                                sampling=sampling,
                            )
                        )
                    )
                    await stream.read()
                await stream.done_writing()
                await stub.ApplyUpdate(pb.UpdateRequest(step=1, terms=[pb.SeedCoefficient(seed=100, coeff=1e-5)]))
            return peak_of(server.pid)
        finally:
            server.terminate()
            server.wait(timeout=30)


def grpo_peak(run: str | None, steps: int, model: str, batch: int, tokens: int) -> tuple[int, str]:
    """(peak RSS of TRL GRPO training, where the number comes from)."""
    if run:
        summary = json.loads((Path(run) / "summary.json").read_text())
        return int(summary["peak_rss_bytes"]), f"{run}/summary.json"
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "seedcast.cli",
                "grpo",
                "--no-progress",
                "--run-dir",
                f"{scratch}/run",
                f"model.name={model}",
                f"batch_size={batch}",
                "eval_every=0",
                f"grpo.steps={steps}",
                f"sampling.max_new_tokens={tokens}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        summary = json.loads(Path(f"{scratch}/run/summary.json").read_text())
    return int(summary["peak_rss_bytes"]), f"{steps} GRPO step(s) measured here"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=32, help="problems per batch (ES member / GRPO step)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--members", type=int, default=4, help="mirrored members the ES server evaluates")
    parser.add_argument("--grpo-run", default=None, help="a `seedcast grpo` run with the same model and batch")
    parser.add_argument("--grpo-steps", type=int, default=0, help="run this many GRPO steps here instead")
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    inference = plain_inference_peak(args.model, args.prompts, args.max_new_tokens)
    es = asyncio.run(es_server_peak(args.model, args.prompts, args.max_new_tokens, args.members))
    cached = asyncio.run(es_server_peak(args.model, args.prompts, args.max_new_tokens, args.members, pair_cache=True))
    table = asyncio.run(es_server_peak(args.model, args.prompts, args.max_new_tokens, args.members, noise="table"))
    rows = [
        ("plain inference", inference, "fresh process: load + generate the batch"),
        ("ES server", es, f"seedcast serve: {args.members} mirrored members + 1 update"),
        ("ES server --pair-cache", cached, "the same, one more inference-dtype copy of the weights"),
        ("ES server --noise table", table, "the same as ES server, plus the 64 MiB noise table"),
    ]
    if args.grpo_run or args.grpo_steps:
        grpo, source = grpo_peak(args.grpo_run, args.grpo_steps, args.model, args.prompts, args.max_new_tokens)
        rows.append(("TRL GRPO training", grpo, source))
        print(f"ES server ÷ GRPO training: {es / grpo:.2f} (with --pair-cache: {cached / grpo:.2f})\n")
    print("| process | peak RSS (GiB) | ÷ plain inference | note |\n|---|---|---|---|")
    for name, peak, note in rows:
        print(f"| {name} | {peak / GIB:.2f} | {peak / inference:.2f} | {note} |")
    if args.json:
        Path(args.json).write_text(
            json.dumps([{"process": n, "peak_rss_bytes": p, "note": t} for n, p, t in rows], indent=2) + "\n"
        )


if __name__ == "__main__":
    main()
