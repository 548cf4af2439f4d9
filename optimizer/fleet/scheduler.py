"""The asynchronous scheduler: a work queue of members feeding any number of servers.

Each server gets the iteration's prompt batch once, then members one at a time as it frees up;
a fast server simply takes more members (no lock-step waves). Failure handling:

- a server whose stream breaks, or that does not answer a member within `member_deadline_seconds`
  (stalled, e.g. SIGSTOP), leaves the active set; its member goes back to the queue for another
  server. The trainer readmits it later, after a Sync proves its weights;
- with a `quorum` (fraction of the population), the iteration may close once
  `iteration_deadline_seconds` have passed and that many members returned; results still in flight
  are abandoned, and counted as dropped.

Members that take under `FAST_MEMBER_SECONDS` (simulated servers, tiny models) would leave the
optimizer spending its time on one gRPC message each way per member; for those it sends several
members per message (`MemberTasks`), sized so every server gets one message per iteration (at most
MAX_MEMBERS_PER_MESSAGE members, so small fleets get several).
Real members (tenths of a second and more) always go one per message, so a server never holds
members another server could take.
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

from seedcast.optimizer.es.strategy import Member
from seedcast.optimizer.fleet.client import ServerClient
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.errors import SeedcastError
from seedcast.proto.reward_bytes import decode_rewards
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field

log = logging.getLogger("seedcast.scheduler")

FAST_MEMBER_SECONDS = 0.002  # below this per member, several members share a message
MAX_MEMBERS_PER_MESSAGE = 32
# Fast members are shared out in one message per server per iteration (two halved the optimizer's capacity at
# 1,024 servers: every message is a write and a read of about 70 µs each in grpc.aio).
MESSAGES_PER_SERVER = 1


class FleetExhaustedError(SeedcastError, RuntimeError):
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
    prompt_rewards: list[float] | None = None  # per prompt, from one byte each, when the task asked for them

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
    members: list[Member]  # each carries the σ it is evaluated at
    sampling: pb.SamplingParams
    summary_only: bool = True  # results carry the member's mean reward, not one reward per prompt
    per_prompt: bool = False  # results also carry one byte per prompt (per-prompt fitness)
    stochastic_rounding: bool = False  # servers cast perturbed weights with stochastic rounding


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
        self.seconds_per_member: float | None = None  # moving average of the servers' own time per member
        self.task_messages = 0  # MemberTask / MemberTasks messages sent

    @staticmethod
    def _member_task(work: IterationWork, member: Member) -> pb.MemberTask:
        sampling = pb.SamplingParams()
        sampling.CopyFrom(work.sampling)
        sampling.seed = member.sampling_seed
        return pb.MemberTask(
            iteration=work.iteration,
            member=member.index,
            seed=member.seed,
            sign=member.sign,
            sigma=member.sigma,
            sampling=sampling,
            expected_step=work.step,
            summary_only=work.summary_only,
            per_prompt_q8=work.per_prompt,
            stochastic_rounding=work.stochastic_rounding,
        )

    def _request(self, work: IterationWork, members: list[Member]) -> pb.EvaluateRequest:
        if len(members) == 1:
            return pb.EvaluateRequest(task=self._member_task(work, members[0]))
        return pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[self._member_task(work, m) for m in members]))

    def members_per_message(self, population: int) -> int:
        """1 for members slower than FAST_MEMBER_SECONDS (or not measured yet); for fast ones, enough to share
        `population` members out in MESSAGES_PER_SERVER messages per server, at most MAX_MEMBERS_PER_MESSAGE."""
        if self.seconds_per_member is None or self.seconds_per_member >= FAST_MEMBER_SECONDS:
            return 1
        per_server = population / (MESSAGES_PER_SERVER * max(1, len(self.clients)))
        return max(1, min(MAX_MEMBERS_PER_MESSAGE, math.ceil(per_server)))

    def _measured(self, reports: list[MemberReport]) -> None:
        """Track the servers' own seconds per member (their phase timings: no network, no queueing)."""
        for report in reports:
            if report.error is None:
                seconds = sum(report.timings.values())
                previous = self.seconds_per_member
                self.seconds_per_member = seconds if previous is None else 0.8 * previous + 0.2 * seconds

    def _retire(self, client: ServerClient, reason: str) -> None:
        """Take a failed or stalled server out of the active set (the trainer may readmit it)."""
        client.drop_stream()
        if client in self.clients:
            self.clients.remove(client)
        self.last_error = f"{client.address}: {reason}"

    async def _serve_queue(
        self,
        client: ServerClient,
        work: IterationWork,
        queue: deque[Member],
        reports: dict[int, MemberReport],
        in_flight: dict[ServerClient, list[Member]],
        on_report: Callable[[MemberReport], None],
        pending: dict[ServerClient, deque[Member]],
    ) -> None:
        while client in self.clients:
            # Sized by the iteration's population, not the queue left: sizing by what is left would halve the
            # messages as the queue drains and end the iteration on a long tail of one-member messages.
            members = self._claim(client, queue, pending, self.members_per_message(len(work.members)))
            if not members:
                return
            in_flight[client] = members
            deadline = None if self.deadlines.member_seconds is None else self.deadlines.member_seconds * len(members)
            try:
                stream = client.evaluate_stream()
                if client.batch_iteration != work.iteration:
                    await stream.write(pb.EvaluateRequest(batch=work.batch))
                    client.batch_iteration = work.iteration
                await stream.write(self._request(work, members))
                self.task_messages += 1
                response = await asyncio.wait_for(stream.read(), deadline)
                if response is grpc.aio.EOF:
                    raise ConnectionError("the server closed the stream")
                answers = [response] if len(members) == 1 else list(response.batch.responses)
                if len(answers) != len(members):
                    raise ConnectionError(f"the server answered {len(answers)} of {len(members)} members")
            except (grpc.aio.AioRpcError, ConnectionError, asyncio.InvalidStateError, asyncio.TimeoutError) as error:
                if isinstance(error, asyncio.TimeoutError):
                    detail = f"no answer within the {deadline:g} s member deadline (stalled)"
                    self.members_dropped += len(members)  # if it ever answers, those results are not used
                else:
                    detail = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error)
                log.warning(
                    "server %s failed on member %s (%s); reassigning",
                    client.address,
                    ", ".join(str(m.index) for m in members),
                    detail,
                )
                del in_flight[client]
                queue.extendleft(reversed([*members, *pending.pop(client, ())]))  # its claimed partner too
                self.members_reassigned += len(members)
                self._retire(client, detail)
                return
            del in_flight[client]
            done = [self._report(m, client.address, answer) for m, answer in zip(members, answers, strict=True)]
            self._measured(done)
            for report in done:
                reports[report.member.index] = report
                on_report(report)
        queue.extend(pending.pop(client, ()))  # retired by someone else: its claimed partner goes back

    @staticmethod
    def _claim(
        client: ServerClient, queue: deque[Member], pending: dict[ServerClient, deque[Member]], count: int = 1
    ) -> list[Member]:
        """The next members for `client` (empty when none is left): the mirrored partner it claimed with its
        last member, else the head of the queue (claiming the partner right behind it), else an unstarted
        partner claimed by a busy server. With `count` > 1, up to that many from the head of the queue, pairs
        kept whole.

        Keeping both halves of a pair on one server lets a `--pair-cache` server evaluate the second half
        without drawing the noise again; taking claimed partners when the queue is empty keeps the tail busy.
        """
        mine = pending.get(client)
        if mine:
            return [mine.popleft()]
        if queue and count > 1:
            members = [queue.popleft() for _ in range(min(count, len(queue)))]
            if queue and queue[0].seed == members[-1].seed and queue[0].sign == -members[-1].sign:
                members.append(queue.popleft())
            return members
        if queue:
            member = queue.popleft()
            if queue and queue[0].seed == member.seed and queue[0].sign == -member.sign:
                pending[client] = deque([queue.popleft()])
            return [member]
        for claimed in pending.values():
            if claimed:
                return [claimed.popleft()]
        return []

    @staticmethod
    def _report(member: Member, server: str, response: pb.EvaluateResponse) -> MemberReport:
        if response.HasField("failure"):
            return MemberReport(member=member, server=server, error=response.failure.error)
        result = response.result
        timings = {phase: getattr(result.timings, phase_field(phase)) for phase in MEMBER_PHASES}
        # A summary-only result's mean is exactly the mean of its per-prompt rewards (the server rounds each to
        # float32 first), so the fitness is the same either way.
        rewards = list(result.rewards) if len(result.rewards) else [result.reward_mean]
        return MemberReport(
            member=member,
            server=server,
            rewards=rewards,
            completion_tokens=result.total_completion_tokens,
            timings=timings,
            prompt_rewards=decode_rewards(result.prompt_rewards_q8) if result.prompt_rewards_q8 else None,
        )

    def _quorum_met(self, reports: dict[int, MemberReport], population: int, started: float) -> bool:
        quorum, limit = self.deadlines.quorum, self.deadlines.iteration_seconds
        if quorum is None or limit is None:
            return False
        return time.monotonic() - started >= limit and len(reports) >= math.ceil(quorum * population)

    async def run_iteration(
        self, work: IterationWork, on_report: Callable[[MemberReport], None] = lambda report: None
    ) -> dict[int, MemberReport]:
        """Evaluate the members of `work`; returns member index → report (all, or a quorum)."""
        queue: deque[Member] = deque(work.members)
        reports: dict[int, MemberReport] = {}
        in_flight: dict[ServerClient, list[Member]] = {}
        pending: dict[ServerClient, deque[Member]] = {}  # partners claimed by a server, not started yet
        started = time.monotonic()
        tasks: set[asyncio.Task] = set()
        try:
            while queue or tasks:
                if queue:
                    busy = {task.get_name() for task in tasks}
                    idle = [c for c in self.clients if c.address not in busy]
                    if not idle and not tasks:
                        raise FleetExhaustedError(
                            f"no inference server left with {len(queue)} members to "
                            f"evaluate; last error: {self.last_error}"
                        )
                    for client in idle:
                        tasks.add(
                            asyncio.create_task(
                                self._serve_queue(client, work, queue, reports, in_flight, on_report, pending),
                                name=client.address,
                            )
                        )
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
            log.warning(
                "iteration %d closed on a quorum of %d/%d members; abandoning %d in flight",
                work.iteration,
                len(reports),
                len(work.members),
                len(in_flight),
            )
            self.members_dropped += sum(len(members) for members in in_flight.values())
            for client in in_flight:
                client.drop_stream()  # its late answer would arrive on this stream; a new one starts clean
        return reports
