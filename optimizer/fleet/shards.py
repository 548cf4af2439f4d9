"""Prompt-sharded members: the unit of work is one member on one fixed slice of the iteration's prompts.

With `fleet.prompt_shards = S`, member m becomes S units (m, 0) … (m, S−1); unit k covers prompts
[k·B/S, (k+1)·B/S) of the batch (integer division, the servers' `shard_slice`). Servers that finish early
take units of members still running, so the iteration's tail shrinks from a whole member to a shard.

Results never depend on which server ran which unit: a unit's result is a pure function of (member, shard)
(its slice is a fixed batch, its sampling seed derives from the member's and the shard's), and a member's
report is merged from its units in shard order. S is fixed by the config, so one S gives bit-identical
fitness and update logs on 1, 2 or 3 servers; another S is another (equally valid) run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from seedcast.optimizer.es.seeds import derive_seed
from seedcast.optimizer.es.strategy import Member
from seedcast.proto.scorable import mean_of_scorable


@dataclass
class MemberReport:
    """What came back for one member (or, inside the scheduler, for one of its prompt shards)."""

    member: Member
    server: str
    rewards: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    prompt_rewards: list[float] | None = None  # per prompt, from one byte each, when the task asked for them
    prompts_scored: int = 0  # prompts with a scorable reward (what weighs a shard's mean when merging)
    summary: bool = False  # `rewards` is [the mean over the prompts], not one reward per prompt
    truncated: int = 0  # answers that stopped at max_new_tokens before ending

    @property
    def fitness(self) -> float:
        """Mean reward over the prompts that could be scored; NaN for a failed member."""
        return mean_of_scorable(self.rewards) if self.error is None else math.nan


@dataclass(frozen=True)
class Unit:
    """One member on one prompt shard (shard 0 of 1: the whole batch)."""

    member: Member
    shard: int = 0
    shards: int = 1

    @property
    def sampling_seed(self) -> int:
        """The member's sampling seed, or for a shard of several one derived from it and the shard."""
        if self.shards == 1:
            return self.member.sampling_seed
        return derive_seed(self.member.sampling_seed, "prompt-shard", self.shard)


def units_of(members: list[Member], shards: int) -> list[Unit]:
    """Each member's shards in order, member after member (a mirrored pair's units stay adjacent)."""
    return [Unit(member, shard, shards) for member in members for shard in range(shards)]


def merge_shards(parts: list[MemberReport]) -> MemberReport:
    """One member's report from its shards' reports, in shard order; one part is returned as it is.

    A failed shard fails the member. Per-prompt rewards are concatenated (shards are contiguous slices); a
    summary-only result's mean is weighed by its scored prompts."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    servers = ",".join(dict.fromkeys(part.server for part in parts))
    failed = next((part for part in parts if part.error is not None), None)
    if failed is not None:
        return MemberReport(member=first.member, server=servers, error=failed.error)
    summary = any(part.summary for part in parts)
    scored = sum(part.prompts_scored for part in parts)
    if not summary:
        rewards = [reward for part in parts for reward in part.rewards]
    else:
        total = sum(part.rewards[0] * part.prompts_scored for part in parts if part.prompts_scored)
        rewards = [total / scored if scored else math.nan]
    timings = {phase: sum(part.timings.get(phase, 0.0) for part in parts) for phase in first.timings}
    prompt_rewards = None
    if all(part.prompt_rewards is not None for part in parts):
        prompt_rewards = [reward for part in parts for reward in part.prompt_rewards]
    return MemberReport(
        member=first.member,
        server=servers,
        rewards=rewards,
        completion_tokens=sum(part.completion_tokens for part in parts),
        truncated=sum(part.truncated for part in parts),
        timings=timings,
        prompt_rewards=prompt_rewards,
        prompts_scored=scored,
        summary=summary,
    )


TAIL_TARGET = 0.95  # below this share of the fleet's time generating, `seedcast train` advises more shards
# What the advised shard count must allow: the target plus room for what each unit costs beyond generating
# (measured on simulated 1 s members: 30 members on 7 servers at S = 2 allow 0.952 and reached 0.948).
ADVISED_BOUND = 0.97


def tail_bound(units: int, servers: int) -> float:
    """The most of a fleet's time that can go to generating when `units` equal units of work run on `servers`
    equal servers: the iteration lasts ceil(units / servers) rounds, and the last one leaves servers idle
    unless the units divide evenly (16 whole members on 7 servers: 16 / 21 = 0.76)."""
    return units / (servers * math.ceil(units / servers))


def advised_shards(population: int, shards: int, servers: int, batch_size: int) -> int | None:
    """The smallest `fleet.prompt_shards` above `shards` (at most `batch_size`) that lets equal servers generate
    ADVISED_BOUND of the time, when `shards` allows less than TAIL_TARGET; None otherwise or if none does."""
    if servers < 2 or tail_bound(population * shards, servers) >= TAIL_TARGET:
        return None
    return next(
        (s for s in range(shards + 1, batch_size + 1) if tail_bound(population * s, servers) >= ADVISED_BOUND), None
    )


def tail_advice(population: int, shards: int, servers: int, batch_size: int) -> str | None:
    """What `seedcast train` logs at start when the fleet's shape caps generation below TAIL_TARGET and a
    larger `fleet.prompt_shards` would lift it to ADVISED_BOUND (advised_shards); None otherwise."""
    better = advised_shards(population, shards, servers, batch_size)
    if better is None:
        return None
    return (
        f"{population} members x {shards} prompt shard(s) on {servers} servers keep at most "
        f"{tail_bound(population * shards, servers):.0%} of the fleet generating (servers idle in each "
        f"iteration's last round); fleet.prompt_shards={better} would allow "
        f"{tail_bound(population * better, servers):.0%} (another S is another, equally valid, run)"
    )
