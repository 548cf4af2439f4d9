"""The asynchronous scheduler: a work queue of members feeding any number of servers.

Each server gets the iteration's prompt batch once, then members one at a time as it frees up;
a fast server simply takes more members (no lock-step waves). A server whose stream breaks is
dropped from the iteration and its in-flight member goes back to the queue for another server.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from seedcast.optimizer.client import ServerClient
from seedcast.optimizer.strategy import Member
from seedcast.proto import seedcast_pb2 as pb

log = logging.getLogger("seedcast.scheduler")


class FleetExhaustedError(RuntimeError):
    """No server is left to evaluate the remaining members."""


@dataclass
class MemberReport:
    """What came back for one member."""

    member: Member
    server: str
    rewards: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    @property
    def fitness(self) -> float:
        """Mean reward over the prompts that could be scored; NaN for a failed member."""
        scored = [r for r in self.rewards if not math.isnan(r)]
        return sum(scored) / len(scored) if (scored and self.error is None) else math.nan


@dataclass
class IterationWork:
    """Everything the servers need for one iteration."""

    iteration: int
    step: int
    batch: pb.PromptBatch
    members: list[Member]
    sigma: float
    sampling: pb.SamplingParams


class FleetScheduler:
    """Runs iterations over a list of connected servers."""

    def __init__(self, clients: list[ServerClient]) -> None:
        self.clients = list(clients)
        self.members_reassigned = 0
        self.last_error = ""

    def _task(self, work: IterationWork, member: Member) -> pb.EvaluateRequest:
        sampling = pb.SamplingParams()
        sampling.CopyFrom(work.sampling)
        sampling.seed = member.sampling_seed
        return pb.EvaluateRequest(task=pb.MemberTask(
            iteration=work.iteration, member=member.index, seed=member.seed, sign=member.sign,
            sigma=work.sigma, sampling=sampling, expected_step=work.step))

    async def _serve_queue(self, client: ServerClient, work: IterationWork, queue: deque[Member],
                           reports: dict[int, MemberReport], on_report: Callable[[MemberReport], None]) -> None:
        while queue:
            member = queue.popleft()
            try:
                stream = client.evaluate_stream()
                if client.batch_iteration != work.iteration:
                    await stream.write(pb.EvaluateRequest(batch=work.batch))
                    client.batch_iteration = work.iteration
                await stream.write(self._task(work, member))
                response = await stream.read()
                if response is grpc.aio.EOF:
                    raise ConnectionError("the server closed the stream")
            except (grpc.aio.AioRpcError, ConnectionError, asyncio.InvalidStateError) as error:
                detail = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error)
                log.warning("server %s failed on member %d (%s); reassigning it", client.address, member.index, detail)
                queue.appendleft(member)
                self.members_reassigned += 1
                client.drop_stream()
                self.clients.remove(client)
                self.last_error = f"{client.address}: {detail}"
                return
            reports[member.index] = self._report(member, client.address, response)
            on_report(reports[member.index])

    @staticmethod
    def _report(member: Member, server: str, response: pb.EvaluateResponse) -> MemberReport:
        if response.HasField("failure"):
            return MemberReport(member=member, server=server, error=response.failure.error)
        result = response.result
        timings = {name: getattr(result.timings, name) for name in
                   ("perturb_seconds", "generate_seconds", "score_seconds", "restore_seconds")}
        return MemberReport(member=member, server=server, rewards=list(result.rewards),
                            completion_tokens=sum(result.completion_tokens), timings=timings)

    async def run_iteration(self, work: IterationWork,
                            on_report: Callable[[MemberReport], None] = lambda report: None) -> dict[int, MemberReport]:
        """Evaluate all members of `work`; returns member index → report."""
        queue: deque[Member] = deque(work.members)
        reports: dict[int, MemberReport] = {}
        self.last_error = ""
        started = time.perf_counter()
        while queue:
            if not self.clients:
                raise FleetExhaustedError(f"no inference server left with {len(queue)} members to evaluate; "
                                          f"last error: {self.last_error}")
            await asyncio.gather(*(self._serve_queue(client, work, queue, reports, on_report)
                                   for client in list(self.clients)))
        log.debug("iteration %d: %d members in %.2f s", work.iteration, len(reports), time.perf_counter() - started)
        return reports
