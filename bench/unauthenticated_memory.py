"""What unauthenticated calls cost a server in memory before they are refused (prints a table).

A server with a bearer token is sent `--calls` concurrent `Sample` calls of `--mib` MiB each without the token;
every one must be refused UNAUTHENTICATED. The table gives the server's peak resident memory before and after
(VmHWM, from /proc), measured in a child process so the client's own copies of the messages do not count. The
server refuses with a handler that never reads the request, so gRPC's flow control keeps each body at the
window; reading them whole cost about 1 GiB for 12 calls of 58 MiB.

    python bench/unauthenticated_memory.py [--calls 12] [--mib 58]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import tempfile
from pathlib import Path

import grpc

from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc

TOKEN = "bench-token-that-is-long-enough"


def _serve(ports: multiprocessing.Queue, token_file: str) -> None:
    from seedcast.inference_server.backends.simulated import SimulatedLatencyTestBackend
    from seedcast.inference_server.security import ServerSecurity
    from seedcast.inference_server.server import start_server

    async def run() -> None:
        security = ServerSecurity.from_files(None, None, None, token_file, "127.0.0.1", False)
        running = await start_server(SimulatedLatencyTestBackend(), "127.0.0.1", 0, security=security)
        ports.put(running.port)
        await asyncio.Event().wait()

    asyncio.run(run())


def _memory_mib(pid: int) -> int:
    """Peak resident memory (VmHWM) of a process, in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) // 1024


async def _attack(port: int, calls: int, mib: int) -> set[str]:
    request = pb.SampleRequest(problems=[pb.Problem(prompt="x" * (mib << 20))])
    options = [("grpc.max_send_message_length", (mib + 8) << 20)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = pb_grpc.InferenceServerStub(channel)

        async def one() -> str:
            try:
                await stub.Sample(request, timeout=60)
                return "OK"
            except grpc.aio.AioRpcError as error:
                return error.code().name

        return set(await asyncio.gather(*(one() for _ in range(calls))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=12, help="concurrent unauthenticated calls (default: 12)")
    parser.add_argument("--mib", type=int, default=58, help="size of each call's request in MiB (default: 58)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        token_file = Path(folder) / "token"
        token_file.write_text(TOKEN + "\n")
        ports: multiprocessing.Queue = multiprocessing.Queue()
        server = multiprocessing.Process(target=_serve, args=(ports, str(token_file)), daemon=True)
        server.start()
        try:
            port = ports.get(timeout=60)
            before = _memory_mib(server.pid)
            codes = asyncio.run(_attack(port, args.calls, args.mib))
            after = _memory_mib(server.pid)
        finally:
            server.terminate()
    print(f"{'calls':>6}{'MiB each':>10}{'answers':>18}{'peak before':>13}{'peak after':>12}{'growth':>8}")
    print(f"{args.calls:>6}{args.mib:>10}{','.join(sorted(codes)):>18}{before:>13}{after:>12}{after - before:>8}")


if __name__ == "__main__":
    main()
