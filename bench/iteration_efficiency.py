"""Iteration-level efficiency: the share of a fleet's time its servers spend generating, where it goes
otherwise, for simulated fleet shapes and for real local servers on the bundled model.

    efficiency = Σ over members of the seconds a server generated for it ÷ (servers × iteration seconds)

    python bench/iteration_efficiency.py --simulated              # fleet shapes, no model (seconds)
    python bench/iteration_efficiency.py --real                   # the bundled model, 1 and 2 local servers
    python bench/iteration_efficiency.py --simulated --real --json docs/results/iteration-efficiency.json
    python bench/iteration_efficiency.py --simulated --prompt-shards 4  # members cut into 4 prompt shards
    python bench/iteration_efficiency.py --simulated --prompt-shards advised --shapes 16x7,30x7
                                            # the S `seedcast train` advises for each shape (1 if none)

Simulated: in-process gRPC servers with SimulatedLatencyTestBackend (a member costs `--latency` seconds of
"generation", 3× that on a slow server) and the optimizer's real FleetScheduler; populations 16 and 30 on 1,
3, 5, 7 and 8 servers, and 16 on 4 servers of which one is 3× slower. What they lose is the iteration's tail:
servers that finished waiting for the last member. Real: `seedcast train` on the bundled SmolLM2-135M (16
members × 32 prompts × 16 tokens, greedy), 1 and 2 local servers, gaussian and table noise; the servers'
own phase timings (perturb, generate, score, restore) against iteration seconds, the rest (update apply,
prompt batch, tail idle, the optimizer) as one remainder. The first iteration warms up and is dropped;
medians of the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.server import start_server
from seedcast.optimizer.es.strategy import ESState, OpenES
from seedcast.optimizer.fleet.client import ServerClient
from seedcast.optimizer.fleet.scheduler import FleetScheduler, IterationWork
from seedcast.optimizer.fleet.shards import advised_shards
from seedcast.proto import seedcast_pb2 as pb

SHAPES = [(population, servers, 1) for population in (16, 30) for servers in (1, 3, 5, 7, 8)] + [(16, 4, 3)]
PROMPTS = 32  # prompts per iteration, as in the embedded default
SAMPLING = pb.SamplingParams(temperature=0, top_p=1, max_new_tokens=1, samples_per_prompt=1)


async def simulated_fleet(
    population: int, servers: int, slowdown: float, latency: float, iterations: int, shards: int = 1
) -> dict:
    """One fleet shape: the last server is `slowdown`× slower; efficiency per iteration (median). A member
    costs `latency` seconds for the whole batch of PROMPTS prompts, a prompt shard its share of that."""
    latencies = [latency] * (servers - 1) + [latency * slowdown]
    running = [
        await start_server(SimulatedLatencyTestBackend(seconds, latency_prompts=PROMPTS), "127.0.0.1", 0)
        for seconds in latencies
    ]
    addresses = [f"127.0.0.1:{server.port}" for server in running]
    clients = [ServerClient(address) for address in addresses]
    strategy = OpenES(population=population, sigma=0.1, learning_rate=0.1, mirrored=population % 2 == 0)
    efficiencies, walls = [], []
    try:
        await asyncio.gather(*(client.wait_ready(30) for client in clients))
        scheduler = FleetScheduler(list(clients))
        for iteration in range(iterations + 1):
            batch = pb.PromptBatch(iteration=iteration, evaluator="synthetic")
            for _ in range(PROMPTS):
                batch.problems.add(prompt="What is 1 + 1?", reference="2")
            members = strategy.ask(ESState(iteration))
            work = IterationWork(iteration, 0, batch, members, SAMPLING, prompt_shards=shards)
            started = time.perf_counter()
            reports = await scheduler.run_iteration(work)
            wall = time.perf_counter() - started
            if iteration:  # the first opens the streams
                generating = sum(report.timings["generate"] for report in reports.values())
                efficiencies.append(generating / (servers * wall))
                walls.append(wall)
    finally:
        for client in clients:
            await client.close()
        for server in running:
            await server.stop(0)
    ideal = population / sum(1 / seconds for seconds in latencies)  # perfectly divisible work, no overhead
    return {
        "population": population,
        "servers": servers,
        "prompt_shards": shards,
        "slow_server": f"1 of {servers} is {slowdown:g}× slower" if slowdown != 1 else None,
        "efficiency": statistics.median(efficiencies),
        "iteration_seconds": statistics.median(walls),
        "ideal_seconds": ideal,
    }


def real_fleet(servers: int, noise: str, iterations: int, shards: int = 1) -> dict:
    """`seedcast train` on the bundled model; the servers' phase seconds against iteration seconds."""
    from seedcast.optimizer.config_files import load_config
    from seedcast.optimizer.run_dir import RunDirectory
    from seedcast.optimizer.trainer import Trainer

    overrides = [
        f"iterations={iterations + 1}",
        "eval_every=0",
        "es.population=16",
        "batch_size=32",
        f"es.noise={noise}",
        f"fleet.local={servers}",
        f"fleet.threads_per_server={max(1, 2 // servers)}",
        f"fleet.prompt_shards={shards}",
    ]
    config = load_config(overrides=overrides)
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDirectory.create(Path(tmp) / "run", config)
        result = asyncio.run(Trainer(config, run, show_progress=False).train())
    rows = [r for r in result.metrics if r.iteration >= 1]
    shares: dict[str, list[float]] = {}
    for row in rows:
        budget = servers * row.seconds
        members = row.members_ok or 0
        for phase in ("perturb", "generate", "score", "restore"):
            seconds = row.phase_seconds.get(phase) or 0.0
            shares.setdefault(phase, []).append(members * seconds / budget)
        shares.setdefault("other", []).append(
            1 - sum(shares[p][-1] for p in ("perturb", "generate", "score", "restore"))
        )
    return {
        "servers": servers,
        "noise": noise,
        "prompt_shards": shards,
        "efficiency": statistics.median(shares["generate"]),
        "iteration_seconds": statistics.median(r.seconds for r in rows),
        "shares": {phase: statistics.median(values) for phase, values in shares.items()},
    }


def _parse_shapes(text: str, parser: argparse.ArgumentParser) -> list[tuple[int, int, int]]:
    """`16x7,16x4x3` as (population, servers, slowdown) triples."""
    shapes = []
    for item in text.split(","):
        parts = item.strip().split("x")
        if len(parts) not in (2, 3) or not all(part.isdigit() and int(part) > 0 for part in parts):
            parser.error(f"--shapes: {item!r} is not POPULATIONxSERVERS[xSLOWDOWN] with positive whole numbers")
        shapes.append((int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 1))
    return shapes


def _shards_arg(text: str) -> int | str:
    """`--prompt-shards`: a positive whole number, or 'advised'."""
    if text == "advised":
        return text
    if not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"must be a positive whole number or 'advised', got {text!r}")
    return int(text)


def _advised(population: int, servers: int) -> int:
    """The prompt shards `seedcast train` advises for this shape of equal servers, 1 where it advises none."""
    return advised_shards(population, 1, servers, PROMPTS) or 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--simulated", action="store_true", help="the simulated fleet shapes")
    parser.add_argument("--real", action="store_true", help="real local servers on the bundled model")
    parser.add_argument("--latency", type=float, default=0.2, help="simulated seconds per member (default: 0.2)")
    parser.add_argument("--iterations", type=int, default=3, help="measured iterations per row (default: 3)")
    parser.add_argument(
        "--prompt-shards",
        type=_shards_arg,
        default=1,
        help="fleet.prompt_shards: slices of the batch per member, or 'advised': the S `seedcast train` advises "
        "for each simulated shape, 1 where it advises none (default: 1)",
    )
    parser.add_argument(
        "--shapes", default=None, help="only these simulated shapes, POPULATIONxSERVERS[xSLOWDOWN],... (e.g. 16x7)"
    )
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    if not (args.simulated or args.real):
        parser.error("choose --simulated, --real or both")
    if args.real and args.prompt_shards == "advised":
        parser.error("--prompt-shards advised applies to --simulated shapes only")
    shapes = SHAPES if args.shapes is None else _parse_shapes(args.shapes, parser)
    report: dict = {}
    if args.simulated:
        header = f"{'population':>10}{'servers':>9}{'slow server':>22}{'S':>4}"
        print(f"{header}{'efficiency':>12}{'seconds':>9}{'ideal':>8}")
        report["simulated"] = []
        for population, servers, slowdown in shapes:
            shards = _advised(population, servers) if args.prompt_shards == "advised" else args.prompt_shards
            row = asyncio.run(simulated_fleet(population, servers, slowdown, args.latency, args.iterations, shards))
            report["simulated"].append(row)
            print(
                f"{population:>10}{servers:>9}{row['slow_server'] or '–':>22}{shards:>4}{row['efficiency']:>12.3f}"
                f"{row['iteration_seconds']:>9.2f}{row['ideal_seconds']:>8.2f}",
                flush=True,
            )
    if args.real:
        print(f"\n{'servers':>8}{'noise':>10}{'efficiency':>12}{'perturb':>9}{'score':>8}{'restore':>9}{'other':>8}")
        report["real"] = []
        for servers in (1, 2):
            for noise in ("gaussian", "table"):
                row = real_fleet(servers, noise, args.iterations, args.prompt_shards)
                report["real"].append(row)
                shares = row["shares"]
                print(
                    f"{servers:>8}{noise:>10}{row['efficiency']:>12.3f}{shares['perturb']:>9.3f}"
                    f"{shares['score']:>8.3f}{shares['restore']:>9.3f}{shares['other']:>8.3f}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
