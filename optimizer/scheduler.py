"""The asynchronous scheduler: a work queue of members feeding any number of servers.

Each server gets the iteration's prompt batch once, then members one at a time as it frees up;
a fast server simply takes more members (no lock-step waves). Failure handling:

- a server whose stream breaks, or that does not answer a member within `member_deadline_seconds`
  (stalled, e.g. SIGSTOP), leaves the active set; its member goes back to the queue for another
  server. The trainer readmits it later, after a Sync proves its weights;
- with a `quorum` (fraction of the population), the iteration may close once
  `iteration_deadline_seconds` have passed and that many members returned; results still in flight
  are abandoned, and counted as dropped.
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
    summary_only: bool = True  # results carry the member's mean reward, not one reward per prompt


@dataclass
class Deadlines:
    """Straggler handling: per-member deadline (reassign), optional quorum with an iteration deadline."""

    member_seconds: float | None = None
    quorum: float | None = None
    iteration_seconds: float | None = None


class FleetScheduler:
    """Runs iterations over the active servers (`clients`, shared with the trainer)."""

    def __init__(self, clients: list[ServerClient], deadlines: Deadlines | None = None) -> None:
        self.clients = clients  # the live list: the fleet readmits and removes servers in place
        self.deadlines = deadlines or Deadlines()
        self.members_reassigned = 0
        self.members_dropped = 0
        self.last_error = ""

    def _task(self, work: IterationWork, member: Member) -> pb.EvaluateRequest:
        sampling = pb.SamplingParams()
        sampling.CopyFrom(work.sampling)
        sampling.seed = member.sampling_seed
        return pb.EvaluateRequest(task=pb.MemberTask(
            iteration=work.iteration, member=member.index, seed=member.seed, sign=member.sign,
            sigma=work.sigma, sampling=sampling, expected_step=work.step, summary_only=work.summary_only))

    def _retire(self, client: ServerClient, reason: str) -> None:
        """Take a failed or stalled server out of the active set (the trainer may readmit it)."""
        client.drop_stream()
        if client in self.clients:
            self.clients.remove(client)
        self.last_error = f"{client.address}: {reason}"

    async def _serve_queue(self, client: ServerClient, work: IterationWork, queue: deque[Member],
                           reports: dict[int, MemberReport], in_flight: dict[ServerClient, Member],
                           on_report: Callable[[MemberReport], None],
                           pending: dict[ServerClient, deque[Member]]) -> None:
        while client in self.clients:
            member = self._claim(client, queue, pending)
            if member is None:
                return
            in_flight[client] = member
            try:
                stream = client.evaluate_stream()
                if client.batch_iteration != work.iteration:
                    await stream.write(pb.EvaluateRequest(batch=work.batch))
                    client.batch_iteration = work.iteration
                await stream.write(self._task(work, member))
                response = await asyncio.wait_for(stream.read(), self.deadlines.member_seconds)
                if response is grpc.aio.EOF:
                    raise ConnectionError("the server closed the stream")
            except (grpc.aio.AioRpcError, ConnectionError, asyncio.InvalidStateError, asyncio.TimeoutError) as error:
                if isinstance(error, asyncio.TimeoutError):
                    detail = f"no answer within the {self.deadlines.member_seconds:g} s member deadline (stalled)"
                    self.members_dropped += 1  # if it ever answers, that result is not used
                else:
                    detail = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error)
                log.warning("server %s failed on member %d (%s); reassigning it", client.address, member.index, detail)
                del in_flight[client]
                queue.extendleft(reversed([member, *pending.pop(client, ())]))  # its claimed partner too
                self.members_reassigned += 1
                self._retire(client, detail)
                return
            del in_flight[client]
            reports[member.index] = self._report(member, client.address, response)
            on_report(reports[member.index])
        queue.extend(pending.pop(client, ()))  # retired by someone else: its claimed partner goes back

    @staticmethod
    def _claim(client: ServerClient, queue: deque[Member], pending: dict[ServerClient, deque[Member]]) -> Member | None:
        """The next member for `client`: the mirrored partner it claimed with its last member, else the head of
        the queue (claiming the partner right behind it), else an unstarted partner claimed by a busy server.

        Keeping both halves of a pair on one server lets a `--pair-cache` server evaluate the second half
        without drawing the noise again; taking claimed partners when the queue is empty keeps the tail busy.
        """
        mine = pending.get(client)
        if mine:
            return mine.popleft()
        if queue:
            member = queue.popleft()
            if queue and queue[0].seed == member.seed and queue[0].sign == -member.sign:
                pending[client] = deque([queue.popleft()])
            return member
        for claimed in pending.values():
            if claimed:
                return claimed.popleft()
        return None

    @staticmethod
    def _report(member: Member, server: str, response: pb.EvaluateResponse) -> MemberReport:
        if response.HasField("failure"):
            return MemberReport(member=member, server=server, error=response.failure.error)
        result = response.result
        timings = {name: getattr(result.timings, name) for name in
                   ("perturb_seconds", "generate_seconds", "score_seconds", "restore_seconds")}
        # A summary-only result's mean is exactly the mean of its per-prompt rewards (the server rounds each to
        # float32 first), so the fitness is the same either way.
        rewards = list(result.rewards) if len(result.rewards) else [result.reward_mean]
        return MemberReport(member=member, server=server, rewards=rewards,
                            completion_tokens=result.total_completion_tokens, timings=timings)

    def _quorum_met(self, reports: dict[int, MemberReport], population: int, started: float) -> bool:
        quorum, limit = self.deadlines.quorum, self.deadlines.iteration_seconds
        if quorum is None or limit is None:
            return False
        return time.monotonic() - started >= limit and len(reports) >= math.ceil(quorum * population)

    async def run_iteration(self, work: IterationWork,
                            on_report: Callable[[MemberReport], None] = lambda report: None) -> dict[int, MemberReport]:
        """Evaluate the members of `work`; returns member index → report (all, or a quorum)."""
        queue: deque[Member] = deque(work.members)
        reports: dict[int, MemberReport] = {}
        in_flight: dict[ServerClient, Member] = {}
        pending: dict[ServerClient, deque[Member]] = {}  # partners claimed by a server, not started yet
        started = time.monotonic()
        tasks: set[asyncio.Task] = set()
        try:
            while queue or tasks:
                if queue:
                    busy = {task.get_name() for task in tasks}
                    idle = [c for c in self.clients if c.address not in busy]
                    if not idle and not tasks:
                        raise FleetExhaustedError(f"no inference server left with {len(queue)} members to "
                                                  f"evaluate; last error: {self.last_error}")
                    for client in idle:
                        tasks.add(asyncio.create_task(
                            self._serve_queue(client, work, queue, reports, in_flight, on_report, pending),
                            name=client.address))
                timeout = None
                if self.deadlines.quorum is not None and self.deadlines.iteration_seconds is not None:
                    timeout = max(0.05, self.deadlines.iteration_seconds - (time.monotonic() - started))
                done, tasks = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # re-raise unexpected errors
                if self._quorum_met(reports, len(work.members), started):
                    break
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        if in_flight:
            log.warning("iteration %d closed on a quorum of %d/%d members; abandoning %d in flight",
                        work.iteration, len(reports), len(work.members), len(in_flight))
            self.members_dropped += len(in_flight)
            for client in in_flight:
                client.drop_stream()  # its late answer would arrive on this stream; a new one starts clean
        return reports
