"""The ES training loop: connect the fleet, sync it to the update log, iterate, log, checkpoint.

One iteration: draw the minibatch and the population (both pure functions of the run seed and
the iteration), let the scheduler evaluate the members, `tell` the strategy, append the update to
the log (fsync) *before* broadcasting it, apply it on every server and check their fingerprints
agree. Because the log is written first, a crash at any point resumes to the same weights.
"""

from __future__ import annotations

import asyncio
import logging
import math
import statistics
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from tqdm import tqdm

from seedcast.evaluators.base import Problem
from seedcast.evaluators.datasets import load_problems
from seedcast.optimizer.client import ClientSecurity, ServerClient
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.local_fleet import LocalFleet
from seedcast.optimizer.metrics import OptimizerMetrics
from seedcast.optimizer.run_dir import RunDirectory, UpdateRecord
from seedcast.optimizer.scheduler import FleetScheduler, IterationWork, MemberReport
from seedcast.optimizer.seeds import derive_seed, minibatch_indices
from seedcast.optimizer.strategy import ESState, OpenES
from seedcast.proto import seedcast_pb2 as pb

log = logging.getLogger("seedcast.train")
EVAL_SEED_OFFSET = 1_000_003  # the evaluation set of the synthetic task is drawn from another stream


class FingerprintMismatchError(RuntimeError):
    """Replicas that should hold identical weights do not."""


@dataclass
class TrainResult:
    """What a finished run reports."""

    iterations: int
    fingerprint: str
    metrics: list[dict]


def _problem_proto(problem: Problem, instruction: str) -> pb.Problem:
    prompt = f"{problem.prompt}\n\n{instruction}" if instruction else problem.prompt
    return pb.Problem(prompt=prompt, reference=problem.reference)


class Trainer:
    """Runs one training run against a run directory (new or resumed)."""

    def __init__(self, config: TrainConfig, run: RunDirectory, show_progress: bool = True,
                 registry: CollectorRegistry | None = None) -> None:
        self.config = config
        # A private registry unless the CLI exports the process-wide one (tests run several trainers).
        self.metrics = OptimizerMetrics(config.task.dataset, config.model.name, registry or CollectorRegistry())
        self.run = run
        self.show_progress = show_progress
        self.strategy = OpenES(config.es.population, config.es.sigma, config.es.learning_rate, config.seed,
                               config.es.mirrored, config.es.shaping)
        self.problems = load_problems(config.task.dataset_spec(config.seed))
        self.instruction = config.task.instruction_text()
        self.evaluator = config.task.evaluator_spec()
        self.clients: list[ServerClient] = []
        self.local_fleet: LocalFleet | None = None

    # ----- fleet ---------------------------------------------------------------------------
    def _check_agreement(self, states: dict[str, str], what: str) -> str:
        fingerprints = set(states.values())
        if len(fingerprints) != 1:
            self.metrics.fingerprint_mismatches.inc()
            listing = ", ".join(f"{address}={fp}" for address, fp in states.items())
            raise FingerprintMismatchError(f"servers disagree on the weights {what}: {listing}")
        return fingerprints.pop()

    async def _connect(self) -> None:
        fleet = self.config.fleet
        security = ClientSecurity.from_files(fleet.tls_ca, fleet.tls_cert, fleet.tls_key, fleet.tls_server_name,
                                             fleet.token_file)
        self.clients = [ServerClient(address, security) for address in fleet.servers]
        if fleet.local:
            self.local_fleet = LocalFleet(self.config, self.run.logs_path)
            local_addresses = await asyncio.to_thread(self.local_fleet.start)
            # Local servers listen on loopback in plaintext; they still check the token.
            self.clients += [ServerClient(address, security.plaintext()) for address in local_addresses]
        await asyncio.gather(*(c.wait_ready(self.config.fleet.connect_timeout_seconds) for c in self.clients))

    async def _sync(self, records: list[UpdateRecord]) -> str:
        """Bring every server to the log's last step by replaying the records it lacks."""
        async def sync_one(client: ServerClient) -> str:
            state = await client.state()
            if state.step > len(records):
                raise RuntimeError(f"server {client.address} is at step {state.step} but the run log has "
                                   f"{len(records)} steps; restart that server so it reloads the base model")
            fingerprint = state.weights_fingerprint
            for record in records[state.step:]:
                fingerprint = (await client.apply_update(record.step, record.terms, record.sigma)).weights_fingerprint
            return fingerprint

        fingerprints = await asyncio.gather(*(sync_one(c) for c in self.clients))
        return self._check_agreement(dict(zip([c.address for c in self.clients], fingerprints, strict=True)),
                                f"at step {len(records)}")

    async def _close(self) -> None:
        for client in self.clients:
            await client.close()
        if self.local_fleet is not None:
            await asyncio.to_thread(self.local_fleet.stop)

    # ----- iterations ----------------------------------------------------------------------
    def _sampling(self, temperature: float | None = None) -> pb.SamplingParams:
        s = self.config.sampling
        return pb.SamplingParams(temperature=s.temperature if temperature is None else temperature, top_p=s.top_p,
                                 max_new_tokens=s.max_new_tokens, samples_per_prompt=s.samples_per_prompt)

    def _batch(self, iteration: int) -> pb.PromptBatch:
        indices = minibatch_indices(self.config.seed, iteration, len(self.problems), self.config.batch_size)
        return pb.PromptBatch(iteration=iteration, evaluator=self.evaluator,
                              system_prompt=self.config.task.system_prompt,
                              problems=[_problem_proto(self.problems[i], self.instruction) for i in indices])

    def _eval_problems(self) -> list[pb.Problem]:
        task = self.config.task
        if task.dataset == "synthetic":
            chosen = load_problems(task.dataset_spec(self.config.seed + EVAL_SEED_OFFSET))[: self.config.eval_size]
        else:
            indices = minibatch_indices(derive_seed(self.config.seed, "eval"), 0, len(self.problems),
                                        self.config.eval_size)
            chosen = [self.problems[i] for i in indices]
        return [_problem_proto(problem, self.instruction) for problem in chosen]

    async def evaluate_current(self) -> float:
        """Greedy mean reward of the unperturbed weights on the fixed evaluation set."""
        request = pb.SampleRequest(problems=self._eval_problems(), evaluator=self.evaluator,
                                   sampling=self._sampling(temperature=0.0),
                                   system_prompt=self.config.task.system_prompt)
        request.sampling.samples_per_prompt = 1
        reply = await self.clients[0].sample(request)
        rewards = [r for p in reply.problems for r in p.rewards if not math.isnan(r)]
        return sum(rewards) / len(rewards) if rewards else math.nan

    async def _iteration(self, state: ESState, scheduler: FleetScheduler) -> tuple[ESState, dict]:
        iteration = state.iteration
        members = self.strategy.ask(state)
        work = IterationWork(iteration=iteration, step=iteration, batch=self._batch(iteration), members=members,
                             sigma=self.config.es.sigma, sampling=self._sampling())
        started = time.perf_counter()
        tokens = 0
        bar = tqdm(total=len(members), desc=f"iter {iteration + 1}/{self.config.iterations}", unit="member",
                   disable=not self.show_progress, leave=True, dynamic_ncols=True)
        done_fitness: list[float] = []

        def on_report(report: MemberReport) -> None:
            nonlocal tokens
            tokens += report.completion_tokens
            self.metrics.tokens.inc(report.completion_tokens)
            (self.metrics.members_failed if report.error else self.metrics.members_evaluated).inc()
            if not math.isnan(report.fitness):
                done_fitness.append(report.fitness)
            elapsed = max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(reward=f"{statistics.fmean(done_fitness):.3f}" if done_fitness else "n/a",
                            tok_s=f"{tokens / elapsed:.0f}", refresh=False)
            bar.update(1)

        reassigned_before = scheduler.members_reassigned
        reports = await scheduler.run_iteration(work, on_report)
        bar.close()
        fitness = {index: report.fitness for index, report in reports.items()}
        update, next_state = self.strategy.tell(state, members, fitness)
        self.run.append_update(UpdateRecord(step=update.step, sigma=update.sigma, terms=update.terms))
        replies = await asyncio.gather(*(c.apply_update(update.step, update.terms, update.sigma) for c in self.clients))
        fingerprint = self._check_agreement({c.address: r.weights_fingerprint for c, r in zip(self.clients, replies,
                                                                                          strict=True)},
                                       f"after step {update.step}")
        seconds = time.perf_counter() - started
        rewards = [f for f in fitness.values() if not math.isnan(f)]
        failed = [r for r in reports.values() if r.error]
        for report in failed:
            log.warning("member %d failed on %s: %s", report.member.index, report.server, report.error)
        metrics = {
            "iteration": iteration, "step": update.step, "seconds": seconds,
            "reward_mean": statistics.fmean(rewards) if rewards else None,
            "reward_std": statistics.pstdev(rewards) if rewards else None,
            "reward_max": max(rewards, default=None), "reward_min": min(rewards, default=None),
            "members_ok": len(rewards), "members_failed": len(failed),
            "members_reassigned": scheduler.members_reassigned - reassigned_before,
            "completion_tokens": tokens, "tokens_per_second": tokens / seconds if seconds else 0.0,
            "update_terms": len(update.terms), "fingerprint": fingerprint,
        }
        for phase in ("perturb_seconds", "generate_seconds", "score_seconds", "restore_seconds"):
            values = [r.timings[phase] for r in reports.values() if r.timings]
            metrics[phase] = statistics.fmean(values) if values else None
        self._export_iteration(metrics, len(scheduler.clients))
        return next_state, metrics

    def _export_iteration(self, metrics: dict, servers_up: int) -> None:
        exported = self.metrics
        exported.iteration_seconds.observe(metrics["seconds"])
        exported.current_step.set(metrics["step"])
        exported.servers_up.set(servers_up)
        exported.members_reassigned.inc(metrics["members_reassigned"])
        for name in ("reward_mean", "reward_std", "reward_max"):
            if metrics[name] is not None:
                getattr(exported, name).set(metrics[name])

    async def train(self) -> TrainResult:
        """Run (or resume) to `config.iterations`; returns the final fingerprint and the metrics."""
        records = self.run.updates(repair=True)
        self.run.truncate_metrics(len(records))
        state = ESState(iteration=len(records))
        try:
            await self._connect()
            fingerprint = await self._sync(records)
            if records:
                log.info("resuming at iteration %d (fingerprint %s)", state.iteration, fingerprint)
            scheduler = FleetScheduler(self.clients)
            self.metrics.current_step.set(state.iteration)
            self.metrics.servers_up.set(len(self.clients))
            if self.config.eval_every and state.iteration == 0:
                baseline = await self.evaluate_current()
                self.run.append_metrics({"iteration": -1, "step": 0, "eval_reward": baseline,
                                         "fingerprint": fingerprint})
                self.metrics.eval_reward.set(baseline)
                log.info("base model eval reward %.3f", baseline)
            while state.iteration < self.config.iterations:
                state, metrics = await self._iteration(state, scheduler)
                fingerprint = metrics["fingerprint"]
                if self.config.eval_every and (state.iteration % self.config.eval_every == 0
                                               or state.iteration == self.config.iterations):
                    metrics["eval_reward"] = await self.evaluate_current()
                    self.metrics.eval_reward.set(metrics["eval_reward"])
                self.run.append_metrics(metrics)
                log.info("iteration %d: reward %s (max %s), %d tokens/s, %.1f s%s", metrics["iteration"] + 1,
                         _fmt(metrics["reward_mean"]), _fmt(metrics["reward_max"]), metrics["tokens_per_second"],
                         metrics["seconds"],
                         f", eval {metrics['eval_reward']:.3f}" if "eval_reward" in metrics else "")
        finally:
            await self._close()
        return TrainResult(iterations=state.iteration, fingerprint=fingerprint, metrics=self.run.metrics())


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
