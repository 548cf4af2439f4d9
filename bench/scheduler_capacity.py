"""Scheduler capacity: member results per second the optimizer handles, and how busy it keeps a
fleet, with simulated-latency test servers (no model) in a separate process.

    python bench/scheduler_capacity.py                       # 1..256 servers, then idle time at 256
    python bench/scheduler_capacity.py --servers 1,4,16 --latency 0.2 --json out.json

For each fleet size N: N gRPC servers (SimulatedLatencyTestBackend, answering instantly) run in one
child process; the optimizer's real FleetScheduler evaluates iterations of max(64, 8·N) members
over N real client channels on loopback. Reported: results/s (median of 3 iterations), and the
optimizer's own CPU time per result (its process, gRPC threads included) with the capacity that
implies, results per optimizer CPU-second. On this 2-core machine the simulated fleet's single
process saturates first, so the end-to-end rate understates what the optimizer can take. Then, at a
realistic member latency, the fleet's idle fraction: 1 − (ideal time ÷ measured time), where the
ideal is members ÷ N × latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
from seedcast.inference_server.server import start_server
from seedcast.optimizer.es.strategy import ESState, OpenES
from seedcast.optimizer.fleet.client import ServerClient
from seedcast.optimizer.fleet.scheduler import FleetScheduler, IterationWork
from seedcast.proto import seedcast_pb2 as pb

BATCH = pb.PromptBatch(
    iteration=0, evaluator="synthetic", problems=[pb.Problem(prompt="What is 1 + 1?", reference="2")]
)
SAMPLING = pb.SamplingParams(temperature=0, top_p=1, max_new_tokens=1, samples_per_prompt=1)


async def serve(count: int, latency: float, ports_file: Path) -> None:
    """Child process: `count` servers; their ports written to `ports_file`; runs until killed."""
    servers = [
        await start_server(SimulatedLatencyTestBackend(latency), "127.0.0.1", 0, max_concurrent_rpcs=8)
        for _ in range(count)
    ]
    ports_file.write_text(json.dumps([server.port for server in servers]))
    await asyncio.Event().wait()


def spawn(count: int, latency: float) -> tuple[subprocess.Popen, list[int]]:
    ports_file = Path(tempfile.mkdtemp()) / "ports.json"
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(count), "--latency", str(latency), "--ports-file", str(ports_file)]
    )
    while not ports_file.exists():
        if process.poll() is not None:
            raise RuntimeError("server process failed")
        time.sleep(0.1)
    time.sleep(0.2)
    return process, json.loads(ports_file.read_text())


async def run_iterations(ports: list[int], population: int, iterations: int) -> tuple[list[float], list[float]]:
    """Seconds per iteration, and the optimizer process's CPU seconds per iteration."""
    clients = [ServerClient(f"127.0.0.1:{port}") for port in ports]
    strategy = OpenES(population=population, sigma=0.1, learning_rate=0.1, mirrored=False)
    seconds, cpu_seconds = [], []
    try:
        await asyncio.gather(*(client.wait_ready(60) for client in clients))
        scheduler = FleetScheduler(list(clients))
        for iteration in range(iterations + 1):  # the first iteration warms up the streams
            batch = pb.PromptBatch()
            batch.CopyFrom(BATCH)
            batch.iteration = iteration
            work = IterationWork(
                iteration=iteration, step=0, batch=batch, members=strategy.ask(ESState(iteration)), sampling=SAMPLING
            )
            started, cpu_started = time.perf_counter(), time.process_time()
            reports = await scheduler.run_iteration(work)
            assert len(reports) == population
            if iteration:
                seconds.append(time.perf_counter() - started)
                cpu_seconds.append(time.process_time() - cpu_started)
    finally:
        for client in clients:
            await client.close()
    return seconds, cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default="1,4,16,64,256", help="fleet sizes (default: 1,4,16,64,256)")
    parser.add_argument("--latency", type=float, default=0.5, help="member latency for the idle test (s)")
    parser.add_argument("--idle-servers", type=int, default=256, help="fleet size of the idle test (0: skip it)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ports-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.serve, args.latency, Path(args.ports_file)))
        return
    rows = []
    print(
        f"{'servers':>8}{'members/iter':>14}{'results/s':>11}{'optimizer CPU µs/result':>25}"
        f"{'optimizer capacity/s':>22}"
    )
    for count in (int(n) for n in args.servers.split(",")):
        process, ports = spawn(count, 0.0)
        try:
            population = max(64, 8 * count)
            seconds, cpu_seconds = asyncio.run(run_iterations(ports, population, 3))
        finally:
            process.kill()
            process.wait()
        rate = population / statistics.median(seconds)
        cpu_per_result = statistics.median(cpu_seconds) / population
        rows.append(
            {
                "servers": count,
                "population": population,
                "results_per_second": rate,
                "optimizer_cpu_seconds_per_result": cpu_per_result,
                "optimizer_capacity_per_cpu_second": 1 / cpu_per_result,
            }
        )
        print(f"{count:>8}{population:>14}{rate:>11.0f}{cpu_per_result * 1e6:>25.0f}{1 / cpu_per_result:>22.0f}")
    if not args.idle_servers:
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"rows": rows}, handle, indent=2)
        return
    process, ports = spawn(args.idle_servers, args.latency)
    try:
        population = 8 * args.idle_servers
        seconds = statistics.median(asyncio.run(run_iterations(ports, population, 2))[0])
    finally:
        process.kill()
        process.wait()
    ideal = population / args.idle_servers * args.latency
    idle = 1 - ideal / seconds
    print(
        f"\n{args.idle_servers} servers, {args.latency:g} s per member, {population} members: {seconds:.2f} s per "
        f"iteration against {ideal:.2f} s ideal -> idle fraction {idle:.1%}"
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "rows": rows,
                    "idle": {
                        "servers": args.idle_servers,
                        "latency": args.latency,
                        "seconds": seconds,
                        "ideal": ideal,
                        "idle_fraction": idle,
                    },
                },
                handle,
                indent=2,
            )


if __name__ == "__main__":
    main()
