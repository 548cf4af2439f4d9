"""The ES training loop: connect the fleet, sync it to the update log, iterate, log, checkpoint.

One iteration: draw the minibatch and the population (both pure functions of the run seed and
the iteration), let the scheduler evaluate the members, `tell` the strategy, append the update to
the log (fsync) *before* broadcasting it, apply it on every server and check their fingerprints
agree. Because the log is written first, a crash at any point resumes to the same weights.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from seedcast.evaluators.base import Problem
from seedcast.evaluators.datasets import load_problems
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.es.fitness import member_fitness
from seedcast.optimizer.es.seeds import minibatch_indices
from seedcast.optimizer.es.strategies import make_strategy
from seedcast.optimizer.es.strategy import ESState, Member
from seedcast.optimizer.eval_set import eval_problems, wire_problem
from seedcast.optimizer.fleet.for_run import fleet_for_run
from seedcast.optimizer.fleet.scheduler import Deadlines, FleetScheduler, IterationWork, MemberReport
from seedcast.optimizer.fleet.shards import tail_advice
from seedcast.optimizer.iteration_progress import IterationProgress
from seedcast.optimizer.iteration_summary import summarize_iteration
from seedcast.optimizer.learning_guard import LearningGuard, RunNotLearningError
from seedcast.optimizer.machine import machine_kind
from seedcast.optimizer.metrics import OptimizerMetrics
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.run_records import BASELINE_ITERATION, IterationRecord, RunSummary
from seedcast.optimizer.trackers import Trackers, open_run_trackers
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto.scorable import mean_of_scorable

log = logging.getLogger("seedcast.train")


@dataclass
class TrainResult:
    """What a finished run reports."""

    iterations: int
    fingerprint: str
    metrics: list[IterationRecord]
    reward_curve: str = ""  # the reward curve PNG's path, or why none was drawn (set by seedcast.train / resume)


class Trainer:
    """Runs one training run against a run directory (new or resumed)."""

    def __init__(
        self,
        config: TrainConfig,
        run: RunDirectory,
        show_progress: bool = True,
        registry: CollectorRegistry | None = None,
        on_report: Callable[[MemberReport], None] | None = None,
        problems: list[Problem] | None = None,
    ) -> None:
        self.config = config
        self.on_report = on_report  # called with every member result as it arrives (progress, fault injection)
        # A private registry unless the CLI exports the process-wide one (tests run several trainers).
        self.metrics = OptimizerMetrics(config.task.dataset, config.model.name, registry or CollectorRegistry())
        self.run = run
        self.show_progress = show_progress
        self.strategy = make_strategy(config.es.strategy, run_seed=config.seed, **config.es.strategy_options())
        self.guard = LearningGuard(config.stop_after_idle_iterations)
        self._stop_reason: str | None = None  # set by an iteration after which the run cannot go on learning
        # The task's problems: as the caller already loaded them (preflight), else from the config.
        self.problems = problems or load_problems(config.task.dataset_spec(config.seed))
        self.instruction = config.task.instruction_text()
        self.evaluator = config.task.evaluator_spec()
        self._eval_set: list[pb.Problem] | None = None  # built once, on first use
        self.fleet = fleet_for_run(config, run.logs_path, self.metrics)
        fleet = config.fleet
        self.scheduler = FleetScheduler(
            self.fleet.active, Deadlines(fleet.member_deadline_seconds, fleet.quorum, fleet.iteration_deadline_seconds)
        )

    # ----- iterations ----------------------------------------------------------------------
    def _sampling(self, temperature: float | None = None) -> pb.SamplingParams:
        return self.config.sampling.to_proto(temperature)

    def _batch(self, iteration: int) -> pb.PromptBatch:
        indices = minibatch_indices(self.config.seed, iteration, len(self.problems), self.config.batch_size)
        return pb.PromptBatch(
            iteration=iteration,
            evaluator=self.evaluator,
            **self.config.task.prompt_format(),
            problems=[wire_problem(self.problems[i], self.instruction) for i in indices],
        )

    def _eval_problems(self) -> list[pb.Problem]:
        if self._eval_set is None:
            self._eval_set = self._build_eval_problems()
        return self._eval_set

    def _build_eval_problems(self) -> list[pb.Problem]:
        return [wire_problem(problem, self.instruction) for problem in eval_problems(self.config, self.problems)]

    async def evaluate_current(self) -> float:
        """Greedy mean reward of the unperturbed weights on the fixed evaluation set."""
        request = pb.SampleRequest(
            problems=self._eval_problems(),
            evaluator=self.evaluator,
            sampling=self._sampling(temperature=0.0),
            **self.config.task.prompt_format(),
        )
        request.sampling.samples_per_prompt = 1
        reply = await self.fleet.active[0].sample(request)
        return mean_of_scorable(r for p in reply.problems for r in p.rewards)

    def _fitness(self, reports: dict[int, MemberReport]) -> dict[int, float]:
        """Each returned member's fitness (es.fitness); failed members get NaN and are left out of the update."""
        per_prompt = self.config.es.fitness == "per_prompt"  # per-prompt rewards come as bytes, the mean as a float
        returned = {
            index: report.prompt_rewards if per_prompt else report.rewards
            for index, report in reports.items()
            if report.error is None
        }
        fitness = member_fitness(returned, self.config.es.fitness)
        return {index: fitness.get(index, math.nan) for index in reports}

    def _work(self, iteration: int, members: list[Member]) -> IterationWork:
        return IterationWork(
            iteration=iteration,
            step=iteration,
            batch=self._batch(iteration),
            members=members,
            sampling=self._sampling(),
            per_prompt=self.config.es.fitness == "per_prompt",
            pass_at_k=self.config.es.fitness_k if self.config.es.fitness == "pass_at_k" else 0,
            stochastic_rounding=self.config.es.rounding == "stochastic",
            prompt_shards=self.config.fleet.prompt_shards,
            members_per_batch=self.config.fleet.members_per_batch,
        )

    async def _iteration(self, state: ESState) -> tuple[ESState, IterationRecord]:
        """Ask, evaluate the members on the fleet, tell, log the step (fsync), broadcast it, summarize."""
        scheduler, iteration = self.scheduler, state.iteration
        members = self.strategy.ask(state)
        progress = IterationProgress(
            members=len(members),
            description=f"iter {iteration + 1}/{self.config.iterations}",
            metrics=self.metrics,
            show=self.show_progress,
            forward=self.on_report,
        )
        reassigned_before, dropped_before = scheduler.members_reassigned, scheduler.members_dropped
        await self.fleet.readmit()
        reports = await scheduler.run_iteration(self._work(iteration, members), progress)
        progress.close()
        for report in reports.values():
            if report.error:
                log.warning("member %d failed on %s: %s", report.member.index, report.server, report.error)
        step, next_state = self.strategy.tell(state, members, self._fitness(reports))
        self._stop_reason = self.guard.observe(reports, step)
        self.run.append_update(step, self.fleet.fingerprint)  # logged (fsync) before any server applies it
        fingerprint = await self.fleet.broadcast(step)
        record = summarize_iteration(
            iteration=iteration,
            step=step,
            seconds=time.perf_counter() - progress.started,
            reports=reports,
            tokens=progress.tokens,
            reassigned=scheduler.members_reassigned - reassigned_before,
            dropped=scheduler.members_dropped - dropped_before,
            servers_active=len(self.fleet.active),
            fingerprint=fingerprint,
            answers_per_member=self.config.batch_size * self.config.sampling.samples_per_prompt,
        )
        return next_state, record

    async def train(self) -> TrainResult:
        """Run (or resume) to `config.iterations`; returns the final fingerprint and the metrics."""
        records, before_last = self.run.logged_steps(repair=True)
        self.run.truncate_metrics(len(records))
        state = ESState(iteration=len(records))
        started = time.perf_counter()
        trackers = Trackers([])  # opened once the config is resolved, so they log what the run records
        try:
            logged = next((r.fingerprint for r in reversed(self.run.metrics()) if r.step == len(records)), None)
            fingerprint = await self.fleet.start(
                records, logged_fingerprint=logged, fingerprint_before_last=before_last
            )
            if self.config.es.noise != self.fleet.noise:  # es.noise=auto, now resolved: the run records it
                self.config = self.config.model_copy(
                    update={"es": self.config.es.model_copy(update={"noise": self.fleet.noise})}
                )
                self.run.record_resolved_config(self.config)
                log.info("es.noise=auto: %s noise (written to %s)", self.fleet.noise, self.run.path / "config.yaml")
            trackers = open_run_trackers(self.config, self.run.path)
            config, servers = self.config, len(self.fleet.active)
            advice = tail_advice(config.es.population, config.fleet.prompt_shards, servers, config.batch_size)
            if advice:  # the fleet's shape idles servers in every iteration's tail
                log.info(advice)
            if records:
                # Iterations are counted from 1 in every message, as the progress bar and the iteration log do.
                log.info(
                    "resuming after iteration %d of %d, at iteration %d (fingerprint %s)",
                    state.iteration,
                    self.config.iterations,
                    state.iteration + 1,
                    fingerprint,
                )
            self.metrics.step.set(state.iteration)
            if self.config.eval_every and state.iteration == 0:
                baseline = IterationRecord(
                    iteration=BASELINE_ITERATION,
                    step=0,
                    fingerprint=fingerprint,
                    eval_reward=await self.evaluate_current(),
                )
                self.run.append_metrics(baseline)
                trackers.log_record(baseline)
                self.metrics.eval_reward.set(baseline.eval_reward)
                log.info("base model eval reward %.3f", baseline.eval_reward)
            while state.iteration < self.config.iterations:
                state, record = await self._iteration(state)
                fingerprint = record.fingerprint
                if self.config.eval_every and (
                    state.iteration % self.config.eval_every == 0 or state.iteration == self.config.iterations
                ):
                    record.eval_reward = await self.evaluate_current()
                self.metrics.observe_iteration(record)
                self.run.append_metrics(record)
                trackers.log_record(record)
                log.info(
                    "iteration %d: reward %s (max %s), %d tokens/s, %.1f s%s",
                    record.iteration + 1,
                    _fmt(record.reward_mean),
                    _fmt(record.reward_max),
                    record.tokens_per_second,
                    record.seconds,
                    "" if record.eval_reward is None else f", eval {record.eval_reward:.3f}",
                )
                if self._stop_reason:  # after the step and its metrics are written: the run resumes cleanly
                    self._write_summary(time.perf_counter() - started, fingerprint)
                    raise RunNotLearningError(f"{self._stop_reason} (run directory {self.run.path})")
            self._write_summary(time.perf_counter() - started, fingerprint)
        finally:
            trackers.close()
            await self.fleet.close()
        return TrainResult(iterations=state.iteration, fingerprint=fingerprint, metrics=self.run.metrics())

    def _write_summary(self, seconds: float, fingerprint: str) -> None:
        """RUN_DIR/summary.json: what `seedcast compare` reads next to GRPO's (wall time, tokens, memory)."""
        rows = [r for r in self.run.metrics() if not r.is_baseline]
        peaks = self.fleet.local_peak_rss_bytes()
        self.run.write_summary(
            RunSummary(
                method="es",
                steps=len(rows),
                wall_seconds=sum(r.seconds or 0.0 for r in rows),
                completion_tokens=sum(r.completion_tokens or 0 for r in rows),
                peak_rss_bytes=max(peaks, default=None),
                peak_memory_of="one ES inference server",
                servers_measured=len(peaks),
                fingerprint=fingerprint,
                wall_seconds_this_session=seconds,
                machine=machine_kind(),
                members_failed=self.guard.failed_members,
                idle_iterations=self.guard.idle_iterations,
                truncated_answers=sum(r.truncated_answers or 0 for r in rows),
            )
        )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
