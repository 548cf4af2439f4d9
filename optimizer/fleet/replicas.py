"""The fleet: which servers exist, which are active, and how they are kept identical.

- **Start**: every configured server (and every local one this process starts) must answer; each
  is synced to the update log with one `Sync` call and all must report the same fingerprint.
- **Broadcast**: an update goes to every active server; a server that fails the call leaves the
  active set. If the answers disagree, the servers outside the strict majority are fenced (never
  used again) and reported; with no strict majority the run stops.
- **Readmission** (before each iteration): a server that left the active set, or restarted, is
  synced from the log and rejoins only if its fingerprint equals the fleet's; otherwise it is
  fenced. A server still unreachable is retried at the next iteration. Addresses added to
  `fleet.servers_file` while the run goes on join the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Iterable

import grpc

from seedcast.inference_server.noise.kinds import LEGACY_NOISE_KIND
from seedcast.optimizer.config import FleetConfig
from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.fleet.client import ClientSecurity, ServerClient, ServerUnreachableError
from seedcast.optimizer.fleet.discovery import expand, is_discovered
from seedcast.optimizer.fleet.launcher import Launcher
from seedcast.optimizer.fleet.noise_choice import NoiseMismatchError
from seedcast.optimizer.fleet.server_list import listed_servers, model_mismatch, targets_mismatch
from seedcast.optimizer.metrics import OptimizerMetrics
from seedcast.proto.errors import SeedcastError

log = logging.getLogger("seedcast.fleet")


class FingerprintMismatchError(SeedcastError, RuntimeError):
    """Replicas that should hold identical weights do not, and no strict majority agrees."""


class BatchingUnsupportedError(SeedcastError, RuntimeError):
    """fleet.members_per_batch > 1 on a server that generates members one at a time."""


class Fleet:
    """The servers of one run; `active` is the list the scheduler hands members to."""

    def __init__(
        self,
        config: FleetConfig,
        metrics: OptimizerMetrics,
        choose_noise: Callable[[dict[str, str]], str],
        launcher: Launcher | None = None,
        model: str | None = None,
        lowrank_targets: str | None = None,
    ) -> None:
        """`choose_noise` gets the given servers' noise kinds by address and returns the run's (noise_choice.py);
        `launcher`, what starts the run's own servers (fleet.local), starts them with that kind; `model`, the
        run's model.name, is what every server must report having loaded (None: not checked)."""
        self.config = config
        self.model = model
        self.lowrank_targets = lowrank_targets  # what every server's low-rank members must perturb (None: any)
        self.metrics = metrics
        self.choose_noise = choose_noise
        self.known: dict[str, ClientSecurity] = {}
        self.active: list[ServerClient] = []
        self.fenced: dict[str, str] = {}
        self.steps: list[ESStep] = []
        self.fingerprint = ""
        self.launcher = launcher
        self.noise = ""  # the run's noise kind, chosen by start()
        self.discovered: set[str] = set()  # the addresses dns:/// entries resolved to, last time
        self.launched: set[str] = set()  # the addresses the launcher's servers had, last time
        self.come_and_gone: set[str] = set()  # every address DNS or the launcher gave that is not forgotten yet

    # ----- lifecycle -----------------------------------------------------------------------
    async def start(
        self, steps: list[ESStep], logged_fingerprint: str | None = None, fingerprint_before_last: str | None = None
    ) -> str:
        """Connect, sync every server to `steps`, check agreement; returns the fingerprint.

        On resume, `logged_fingerprint`, the fingerprint the run recorded after its last logged step, must be what
        every server then holds: a server with other weights at that step is refused by name. When the run never
        recorded it (stopped while broadcasting that step), `fingerprint_before_last`, from the durable log, is
        the reference instead: servers are checked against it one step earlier (`_start_before_last`)."""
        fleet = self.config
        security = ClientSecurity.of_fleet(fleet)
        self.remote_security = security
        self.known = {address: security for address in self._named_servers()}
        self.active.extend(ServerClient(address, known) for address, known in self.known.items())
        states = await asyncio.gather(*(c.wait_ready(fleet.connect_timeout_seconds) for c in self.active))
        self.noise = self.choose_noise({c.address: s.noise for c, s in zip(self.active, states, strict=True)})
        if self.launcher is not None:
            self.launcher_security = self.launcher.client_security(security)
            local = [
                ServerClient(address, self.launcher_security)
                for address in await asyncio.to_thread(self.launcher.start, self.noise)
            ]
            self.launched = {client.address for client in local}
            self.known.update((client.address, client.security) for client in local)
            await asyncio.gather(*(c.wait_ready(fleet.connect_timeout_seconds) for c in local))
            self.active.extend(local)
        self.steps = list(steps)
        if not logged_fingerprint and fingerprint_before_last and steps:
            fingerprints = await self._start_before_last(fingerprint_before_last)
        else:
            fingerprints = await asyncio.gather(*(self._sync(client, strict=True) for client in self.active))
        if logged_fingerprint:
            _refuse_others(
                zip(self.active, fingerprints, strict=True),
                logged_fingerprint,
                f"the run logged fingerprint {logged_fingerprint} at step {len(steps)}",
            )
        self.fingerprint = self._agree(dict(zip(self.active, fingerprints, strict=True)), f"at step {len(steps)}")
        self.metrics.servers_up.set(len(self.active))
        return self.fingerprint

    async def _start_before_last(self, before_last: str) -> list[str]:
        """Sync the servers that lack the last step to the step before it and check them against `before_last`,
        then apply the last step to them; servers that already hold it must agree with them. When every server
        holds it, each must report `before_last` as the fingerprint it held before it. Each server's fingerprint,
        in `active` order."""
        last = len(self.steps)
        states = await asyncio.gather(*(client.state() for client in self.active))
        behind = [client for client, state in zip(self.active, states, strict=True) if state.step < last]
        if not behind:
            return self._check_parents(states, before_last)
        all_steps, self.steps = self.steps, self.steps[:-1]
        before = await asyncio.gather(*(self._sync(client, strict=True) for client in behind))
        self.steps = all_steps
        _refuse_others(
            zip(behind, before, strict=True),
            before_last,
            f"the run's log records fingerprint {before_last} at step {last - 1}",
            " (and check es.noise in config.yaml)",
        )
        checked = dict(zip(behind, await asyncio.gather(*(self._sync(c, strict=True) for c in behind)), strict=True))
        reference = self._agree(checked, f"at step {last}")
        fingerprints = [checked.get(c) or await self._sync(c, strict=True) for c in self.active]
        _refuse_others(
            zip(self.active, fingerprints, strict=True),
            reference,
            f"servers checked against the log hold {reference} at step {last}",
        )
        return fingerprints

    def _check_parents(self, states: list, before_last: str) -> list[str]:
        """Every server already holds the last step: check the fingerprint each held before it against the log's
        (start() then checks that they agree after it). A server that cannot report it is refused, never trusted."""
        last = len(self.steps)
        for client, state in zip(self.active, states, strict=True):
            unfit = self._unfit(client, state)
            if unfit is not None:
                error, message, _ = unfit
                raise error(message)
            if not state.parent_fingerprint:
                raise FingerprintMismatchError(
                    f"the run stopped while broadcasting step {last}, so no fingerprint after it was recorded, and "
                    f"server {client.address} already holds step {last} but cannot say which weights it applied it "
                    f"to; restart it so it reloads the base model and replays the log"
                )
        wrong = [
            f"{client.address} applied it to {state.parent_fingerprint}"
            for client, state in zip(self.active, states, strict=True)
            if state.parent_fingerprint != before_last
        ]
        if wrong:
            raise FingerprintMismatchError(
                f"the run's log records fingerprint {before_last} before step {last}, but {', '.join(wrong)}; "
                "restart those servers so they reload the base model and replay the log (and check es.noise in "
                "config.yaml)"
            )
        return [state.weights_fingerprint for state in states]  # start() checks that they agree

    def local_peak_rss_bytes(self) -> list[int]:
        """Peak resident memory of each local server (empty without local servers)."""
        return self.launcher.peak_rss_bytes() if self.launcher is not None else []

    async def close(self) -> None:
        """Close every channel and stop local servers."""
        for client in self.active:
            await client.close()
        self.active.clear()
        if self.launcher is not None:
            await asyncio.to_thread(self.launcher.stop)

    # ----- keeping replicas identical --------------------------------------------------------
    async def _sync(self, client: ServerClient, strict: bool) -> str:
        """Replay the steps the server lacks; a server that can never hold the run's weights is an error (strict)
        or fenced (it answers a fingerprint no other server has)."""
        state = await client.state()
        unfit = self._unfit(client, state)
        if unfit is not None:
            error, message, fenced_as = unfit
            if strict:
                raise error(message)
            return fenced_as
        if state.step == len(self.steps):
            return state.weights_fingerprint
        return (await client.sync(self.steps[state.step :])).weights_fingerprint

    def _unfit(self, client: ServerClient, state) -> tuple[type[SeedcastError], str, str] | None:
        """Why a server can never hold this run's weights: (error, message, what it is fenced as); None if it can."""
        noise = state.noise or LEGACY_NOISE_KIND
        if noise != self.noise:
            message = (
                f"server {client.address} perturbs with {noise[:40]!r} noise but this run uses "
                f"{self.noise} noise; restart it with `seedcast serve --noise {self.noise}`"
            )
            return NoiseMismatchError, message, f"{noise[:40]}-noise"
        message = model_mismatch(client.address, state.model, self.model)
        if message is not None:
            return FingerprintMismatchError, message, f"model:{state.model[:40]}"
        message = targets_mismatch(client.address, state.lowrank_targets, self.lowrank_targets)
        if message is not None:
            return FingerprintMismatchError, message, f"targets:{state.lowrank_targets[:40]}"
        if self.config.members_per_batch > 1 and not state.batches_members:
            message = (
                f"server {client.address} ({state.backend or 'an older version'}) generates members one at a time, "
                f"but fleet.members_per_batch={self.config.members_per_batch} sends it groups to generate together; "
                "use hf servers of this version, vllm servers started with "
                "`--batch-members G --lowrank-targets linear`, or set fleet.members_per_batch=1"
            )
            return BatchingUnsupportedError, message, "no-member-batches"
        if state.step > len(self.steps):
            message = (
                f"server {client.address} is at step {state.step} but the run log has {len(self.steps)} "
                "steps; restart it so it reloads the base model"
            )
            return FingerprintMismatchError, message, f"ahead-of-log:{state.step}"
        return None

    def _fence(self, client: ServerClient, reason: str) -> None:
        log.error("fencing server %s: %s; it will not be used again in this run", client.address, reason)
        self.fenced[client.address] = reason
        self.metrics.servers_fenced.inc()
        client.drop_stream()
        if client in self.active:
            self.active.remove(client)

    def _agree(self, fingerprints: dict[ServerClient, str], what: str) -> str:
        """The fingerprint of the strict majority; fences the rest, or raises without a strict majority."""
        counts = Counter(fingerprints.values())
        majority, votes = counts.most_common(1)[0]
        if len(counts) > 1:
            self.metrics.fingerprint_mismatches.inc()
            listing = ", ".join(f"{c.address}={fp}" for c, fp in fingerprints.items())
            if votes * 2 <= len(fingerprints):
                raise FingerprintMismatchError(f"servers disagree on the weights {what}, with no majority: {listing}")
            for client, fingerprint in fingerprints.items():
                if fingerprint != majority:
                    self._fence(client, f"fingerprint {fingerprint} != fleet {majority} {what}")
        return majority

    async def broadcast(self, step: ESStep) -> str:
        """Apply a (logged) update on every active server; returns the agreed fingerprint."""
        self.steps.append(step)
        clients = list(self.active)
        replies = await asyncio.gather(
            *(c.apply_update(step) for c in clients),
            return_exceptions=True,
        )
        fingerprints = {}
        for client, reply in zip(clients, replies, strict=True):
            if isinstance(reply, grpc.aio.AioRpcError):
                log.warning(
                    "server %s failed to apply step %d (%s); it leaves the active set",
                    client.address,
                    step.step,
                    reply.details(),
                )
                client.drop_stream()
                self.active.remove(client)
            elif isinstance(reply, BaseException):
                raise reply
            else:
                fingerprints[client] = reply.weights_fingerprint
        if fingerprints:
            self.fingerprint = self._agree(fingerprints, f"after step {step.step}")
        if not self.active:  # every server failed the update: try to bring some back right away
            await self.readmit()
        self.metrics.servers_up.set(len(self.active))
        if not self.active:
            from seedcast.optimizer.fleet.scheduler import FleetExhaustedError

            raise FleetExhaustedError(f"no inference server applied step {step.step} or could rejoin")
        return self.fingerprint

    def _named_servers(self) -> list[str]:
        """The servers the fleet section names now: fleet.servers (dns:/// entries resolved now) and the lines of
        fleet.servers_file; the addresses found by DNS are remembered in `discovered`."""
        found = expand(entry for entry in self.config.servers if is_discovered(entry))
        self.discovered = set(found)
        static = [entry for entry in self.config.servers if not is_discovered(entry)]
        return list(dict.fromkeys([*static, *found, *listed_servers(self.config)]))

    async def readmit(self) -> None:
        """Sync and readmit servers that left the active set (or restarted), if their weights agree."""
        for address in self._named_servers():
            if address not in self.known:
                log.info("server %s is new to the fleet section; it joins after a Sync", address)
                self.known[address] = self.remote_security
        if self.launcher is not None:
            self.launched = set(await asyncio.to_thread(self.launcher.current_addresses))
            for address in sorted(self.launched - set(self.known)):
                log.info("server %s was restarted by its launcher; it joins after a Sync", address)
                self.known[address] = self.launcher_security
        active_addresses = {c.address for c in self.active}
        self.come_and_gone |= self.discovered | self.launched
        for gone in sorted(self.come_and_gone - self.discovered - self.launched - active_addresses):
            log.info("server %s no longer resolves, or its launcher replaced it; forgotten", gone)  # not retried
            self.known.pop(gone, None)
            self.come_and_gone.discard(gone)
        waiting = [a for a in self.known if a not in active_addresses and a not in self.fenced]
        if not waiting:
            self.metrics.servers_up.set(len(self.active))
            return
        await asyncio.gather(*(self._readmit_one(address) for address in waiting))
        self.metrics.servers_up.set(len(self.active))

    async def _readmit_one(self, address: str) -> None:
        client = ServerClient(address, self.known[address])
        try:
            await client.wait_ready(self.config.rejoin_timeout_seconds)
            fingerprint = await asyncio.wait_for(self._sync(client, strict=False), self.config.connect_timeout_seconds)
        except (ServerUnreachableError, grpc.aio.AioRpcError, asyncio.TimeoutError):
            await client.close()
            return
        if fingerprint != self.fingerprint:
            self._fence(client, f"after sync its fingerprint {fingerprint} != fleet {self.fingerprint}")
            await client.close()
            return
        log.info("server %s rejoined at step %d", address, len(self.steps))
        self.metrics.servers_rejoined.inc()
        self.active.append(client)


def _refuse_others(held: Iterable[tuple[ServerClient, str]], expected: str, claim: str, hint: str = "") -> None:
    """Refuse, by name, every server whose fingerprint is not `expected` (`claim` says where it comes from)."""
    listing = ", ".join(
        f"{client.address} holds {fingerprint}" for client, fingerprint in held if fingerprint != expected
    )
    if listing:
        raise FingerprintMismatchError(
            f"{claim}, but {listing}; restart those servers so they reload the base model and replay the log{hint}"
        )
