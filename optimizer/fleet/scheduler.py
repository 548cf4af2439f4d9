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

With `fleet.members_per_batch = G` > 1 (low-rank members) a server takes a whole group of G members, members
[k·G, (k+1)·G) of the population, in one batched message, and generates them together.

With `fleet.prompt_shards` > 1 the unit of work is a member on one slice of the batch (shards.py): a
server claims a pair's units together, idle servers take the last unclaimed units of busy ones, each
server keeps one more unit in its stream while unclaimed units remain (none in the tail, so no unit waits
behind a slow one), and a member's report is merged once all its units are in.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from seedcast.optimizer.es.strategy import Member
from seedcast.optimizer.fleet.client import ServerClient
from seedcast.optimizer.fleet.shards import MemberReport, Unit, merge_shards, units_of
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
PIPELINE_DEPTH = 2  # messages a server holds at once when the units are prompt shards


class FleetExhaustedError(SeedcastError, RuntimeError):
    """No server is left to evaluate the remaining members."""


@dataclass
class IterationWork:
    """Everything the servers need for one iteration."""

    iteration: int
    step: int
    batch: pb.PromptBatch
    members: list[Member]  # each carries the σ it is evaluated at
    sampling: pb.SamplingParams
    per_prompt: bool = False  # results also carry one byte per prompt (per-prompt fitness)
    pass_at_k: int = 0  # a prompt's reward is the pass@k of its samples (es.fitness=pass_at_k), else their mean
    stochastic_rounding: bool = False  # servers cast perturbed weights with stochastic rounding
    prompt_shards: int = 1  # the unit of work is a member on one of this many slices of the batch (shards.py)
    members_per_batch: int = 1  # low-rank members a server generates together: fixed groups of the population


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
    def _member_task(work: IterationWork, unit: Unit) -> pb.MemberTask:
        member = unit.member
        sampling = pb.SamplingParams()
        sampling.CopyFrom(work.sampling)
        sampling.seed = unit.sampling_seed
        return pb.MemberTask(
            iteration=work.iteration,
            member=member.index,
            seed=member.seed,
            sign=member.sign,
            sigma=member.sigma,
            sampling=sampling,
            expected_step=work.step,
            summary_only=True,  # the optimizer needs each member's mean reward, not one reward per prompt
            per_prompt_q8=work.per_prompt,
            pass_at_k=work.pass_at_k,
            stochastic_rounding=work.stochastic_rounding,
            rank=member.rank,
            shard=unit.shard,
            shards=unit.shards if unit.shards > 1 else 0,  # the whole batch is written 0 on the wire
        )

    def _request(self, work: IterationWork, units: list[Unit]) -> pb.EvaluateRequest:
        if work.members_per_batch > 1:  # one group, generated together: its members' batch mates are fixed
            tasks = [self._member_task(work, u) for u in units]
            return pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=tasks, batched=True))
        if len(units) == 1:
            return pb.EvaluateRequest(task=self._member_task(work, units[0]))
        return pb.EvaluateRequest(tasks=pb.MemberTasks(tasks=[self._member_task(work, u) for u in units]))

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
        queue: deque[Unit],
        in_flight: dict[ServerClient, list[Unit]],
        on_part: Callable[[MemberReport, Unit], None],
        pending: dict[ServerClient, deque[Unit]],
    ) -> None:
        # Prompt shards are small units: a server keeps one more in its stream (PIPELINE_DEPTH) so it never
        # waits a round trip between them. Whole members go one at a time, so none waits behind another.
        depth = PIPELINE_DEPTH if work.prompt_shards > 1 else 1
        window: deque[list[Unit]] = deque()  # messages written to the stream and not yet answered, oldest first
        units_per_iteration = len(work.members) * work.prompt_shards
        while client in self.clients:
            deadline = None
            try:
                stream = client.evaluate_stream()
                # Sized by the iteration's units, not the queue left: sizing by what is left would halve the
                # messages as the queue drains and end the iteration on a long tail of one-member messages.
                while len(window) < depth and (
                    units := (
                        _claim_group(queue, work.members_per_batch)
                        if work.members_per_batch > 1
                        else self._claim(
                            client, queue, pending, self.members_per_message(units_per_iteration), prefetch=bool(window)
                        )
                    )
                ):
                    window.append(units)  # before any write: a failed write hands them back
                    _track(in_flight, client, window)
                    if client.batch_iteration != work.iteration:
                        await stream.write(pb.EvaluateRequest(batch=work.batch))
                        client.batch_iteration = work.iteration
                    await stream.write(self._request(work, units))
                    self.task_messages += 1
                if not window:
                    return
                units = window[0]
                if self.deadlines.member_seconds is not None:
                    deadline = self.deadlines.member_seconds * len(units)
                response = await asyncio.wait_for(stream.read(), deadline)
                if response is grpc.aio.EOF:
                    raise ConnectionError("the server closed the stream")
                answers = [response] if len(units) == 1 else list(response.batch.responses)
                if len(answers) != len(units):
                    raise ConnectionError(f"the server answered {len(answers)} of {len(units)} members")
            except (grpc.aio.AioRpcError, ConnectionError, asyncio.InvalidStateError, asyncio.TimeoutError) as error:
                sent = [unit for message in window for unit in message]
                if isinstance(error, asyncio.TimeoutError):
                    detail = f"no answer within the {deadline:g} s member deadline (stalled)"
                    self.members_dropped += _members_in(sent)  # if it ever answers, those results are not used
                else:
                    detail = error.details() if isinstance(error, grpc.aio.AioRpcError) else str(error)
                log.warning("server %s failed on member %s (%s); reassigning", client.address, _describe(sent), detail)
                in_flight.pop(client, None)
                queue.extendleft(reversed([*sent, *pending.pop(client, ())]))  # its claimed units too
                self.members_reassigned += _members_in(sent)
                self._retire(client, detail)
                return
            window.popleft()
            _track(in_flight, client, window)
            done = [self._report(u, client.address, answer) for u, answer in zip(units, answers, strict=True)]
            self._measured(done)
            for unit, report in zip(units, done, strict=True):
                on_part(report, unit)
        queue.extend(pending.pop(client, ()))  # retired by someone else: its claimed units go back

    @staticmethod
    def _claim(
        client: ServerClient,
        queue: deque[Unit],
        pending: dict[ServerClient, deque[Unit]],
        count: int = 1,
        prefetch: bool = False,
    ) -> list[Unit]:
        """The next units for `client` (empty when none is left): the next it claimed, else the head of the
        queue (claiming every unit of the same seed behind it: the member's other prompt shards and its
        mirrored partner's), else the last unclaimed unit of the busiest server. With `count` > 1, up to
        that many from the head of the queue, pairs kept whole.

        A `prefetch` (a unit to queue behind the one the server is running) is taken only while the queue
        still holds unclaimed units. In the iteration's tail a unit written to a stream can no longer move,
        so one waiting behind a running unit (on a slow server, 3× as long) would keep idle servers idle.

        Keeping a member's shards and its partner on one server lets it skip the perturbation between shards
        and (`--pair-cache`) evaluate the partner without drawing the noise again; taking others' claimed
        units from the back when the queue is empty keeps the tail busy without splitting their runs.
        """
        if prefetch and not queue:
            return []
        mine = pending.get(client)
        if mine:
            return [mine.popleft()]
        if queue and count > 1:
            units = [queue.popleft() for _ in range(min(count, len(queue)))]
            while queue and queue[0].member.seed == units[-1].member.seed:
                units.append(queue.popleft())
            return units
        if queue:
            unit = queue.popleft()
            claimed: deque[Unit] = deque()
            while queue and queue[0].member.seed == unit.member.seed:
                claimed.append(queue.popleft())
            if claimed:
                pending[client] = claimed
            return [unit]
        busiest = max(pending.values(), key=len, default=None)
        return [busiest.pop()] if busiest else []

    @staticmethod
    def _report(unit: Unit, server: str, response: pb.EvaluateResponse) -> MemberReport:
        member = unit.member
        if response.HasField("failure"):
            return MemberReport(member=member, server=server, error=response.failure.error)
        result = response.result
        timings = {phase: getattr(result.timings, phase_field(phase)) for phase in MEMBER_PHASES}
        # A summary-only result's mean is exactly the mean of its per-prompt rewards (the server rounds each to
        # float32 first), so the fitness is the same either way.
        summary = not len(result.rewards)
        return MemberReport(
            member=member,
            server=server,
            rewards=[result.reward_mean] if summary else list(result.rewards),
            completion_tokens=result.total_completion_tokens,
            truncated=result.truncated_answers,
            timings=timings,
            prompt_rewards=decode_rewards(result.prompt_rewards_q8) if result.prompt_rewards_q8 else None,
            prompts_scored=result.prompts_scored,
            summary=summary,
        )

    def _quorum_met(self, reports: dict[int, MemberReport], population: int, started: float) -> bool:
        quorum, limit = self.deadlines.quorum, self.deadlines.iteration_seconds
        if quorum is None or limit is None:
            return False
        return time.monotonic() - started >= limit and len(reports) >= math.ceil(quorum * population)

    async def run_iteration(
        self, work: IterationWork, on_report: Callable[[MemberReport], None] = lambda report: None
    ) -> dict[int, MemberReport]:
        """Evaluate the members of `work`; returns member index → report (all, or a quorum). With prompt shards,
        a member's report is merged from its shards' as soon as the last one arrives."""
        queue: deque[Unit] = deque(units_of(work.members, work.prompt_shards))
        reports: dict[int, MemberReport] = {}
        parts: dict[int, dict[int, MemberReport]] = {}  # member index → shard → report, until it is complete
        in_flight: dict[ServerClient, list[Unit]] = {}
        pending: dict[ServerClient, deque[Unit]] = {}  # units claimed by a server, not started yet

        def on_part(report: MemberReport, unit: Unit) -> None:
            shards = parts.setdefault(unit.member.index, {})
            shards[unit.shard] = report
            if len(shards) == unit.shards:
                merged = merge_shards([shards[k] for k in range(unit.shards)])
                reports[unit.member.index] = merged
                del parts[unit.member.index]
                on_report(merged)

        started = time.monotonic()
        tasks: set[asyncio.Task] = set()
        try:
            while queue or tasks:
                if queue:
                    busy = {task.get_name() for task in tasks}
                    idle = [c for c in self.clients if c.address not in busy]
                    if not idle and not tasks:
                        raise FleetExhaustedError(
                            f"no inference server left with {_members_in(queue)} members to "
                            f"evaluate; last error: {self.last_error}"
                        )
                    for client in idle:
                        tasks.add(
                            asyncio.create_task(
                                self._serve_queue(client, work, queue, in_flight, on_part, pending),
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
                _members_in(unit for units in in_flight.values() for unit in units),
            )
            self.members_dropped += _members_in(unit for units in in_flight.values() for unit in units)
            for client in in_flight:
                client.drop_stream()  # its late answer would arrive on this stream; a new one starts clean
        return reports


def _claim_group(queue: deque[Unit], members_per_batch: int) -> list[Unit]:
    """The units at the head of the queue of the head unit's group (members [k·G, (k+1)·G) of the population),
    so every member is generated with the same batch mates on whichever server takes it. A failed server's
    group goes back to the head of the queue whole."""
    if not queue:
        return []
    group = queue[0].member.index // members_per_batch
    units = []
    while queue and queue[0].member.index // members_per_batch == group:
        units.append(queue.popleft())
    return units


def _track(in_flight: dict[ServerClient, list[Unit]], client: ServerClient, window: deque[list[Unit]]) -> None:
    """Record the units `client` holds in its stream (none: it leaves `in_flight`)."""
    if window:
        in_flight[client] = [unit for message in window for unit in message]
    else:
        in_flight.pop(client, None)


def _members_in(units) -> int:
    """How many distinct members some units belong to."""
    return len({unit.member.index for unit in units})


def _describe(units: list[Unit]) -> str:
    return ", ".join(str(u.member.index) if u.shards == 1 else f"{u.member.index}/{u.shard}" for u in units)
