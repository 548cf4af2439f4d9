"""Member throughput of real local servers: N servers with T threads each, same run, members/s.

    python bench/fleet_scaling.py                               # 1×1 thread vs 2×1 thread, bundled model
    python bench/fleet_scaling.py --layouts 1x1,2x1,1x2 --iterations 3 --json out.json

Each layout runs the same short ES run (greedy, synthetic task) with `fleet.local=N
fleet.threads_per_server=T`; members/s is population ÷ median iteration seconds (the first
iteration is dropped: it warms up the servers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.trainer import Trainer


def run_layout(servers: int, threads: int, args: argparse.Namespace) -> dict:
    """One run; returns members/s and the iteration seconds."""
    overrides = [
        f"model.name={args.model}",
        f"iterations={args.iterations + 1}",
        f"batch_size={args.prompts}",
        "eval_every=0",
        f"sampling.max_new_tokens={args.max_new_tokens}",
        f"es.population={args.population}",
        f"fleet.local={servers}",
        f"fleet.threads_per_server={threads}",
    ]
    config = load_config(overrides=overrides)
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDirectory.create(Path(tmp) / "run", config)
        result = asyncio.run(Trainer(config, run, show_progress=False).train())
    seconds = [row.seconds for row in result.metrics if row.iteration >= 1]
    median = statistics.median(seconds)
    return {
        "servers": servers,
        "threads": threads,
        "iteration_seconds": seconds,
        "members_per_second": args.population / median,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model spec (default: bundled SmolLM2)")
    parser.add_argument("--layouts", default="1x1,2x1", help="SERVERSxTHREADS, comma-separated (default: 1x1,2x1)")
    parser.add_argument("--iterations", type=int, default=2, help="measured iterations per layout (default: 2)")
    parser.add_argument("--population", type=int, default=8, help="members per iteration (default: 8)")
    parser.add_argument("--prompts", type=int, default=16, help="prompts per member (default: 16)")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="tokens per completion (default: 16)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    rows = []
    for layout in args.layouts.split(","):
        servers, threads = (int(part) for part in layout.split("x"))
        rows.append(run_layout(servers, threads, args))
    base = rows[0]["members_per_second"]
    print(f"{'servers':>8}{'threads each':>14}{'members/s':>11}{'vs first':>10}")
    for row in rows:
        print(
            f"{row['servers']:>8}{row['threads']:>14}{row['members_per_second']:>11.3f}"
            f"{row['members_per_second'] / base:>10.2f}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
