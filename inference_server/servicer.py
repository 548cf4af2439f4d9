"""The gRPC servicer: a thin layer that validates requests and drives one backend.

All backend work runs on a single worker thread, one call at a time (an asyncio lock orders the
calls), so a perturbation is never visible to another request and the event loop stays free to
answer health checks while a member generates.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import grpc
from prometheus_client import CollectorRegistry

from seedcast.evaluators.base import Evaluator
from seedcast.evaluators.registry import load_evaluator
from seedcast.inference_server.backends.base import Backend, BatchMember
from seedcast.inference_server.member import evaluate_member, evaluate_members_batched, score_completions
from seedcast.inference_server.member_answers import member_failure, member_result
from seedcast.inference_server.metrics import ServerMetrics
from seedcast.inference_server.problem_inputs import ProblemInputs, problem_inputs
from seedcast.inference_server.validation import (
    Limits,
    RequestError,
    check_batched,
    check_evaluator_length,
    check_request_texts,
    check_task,
    check_update,
    sampling_from_proto,
    shard_slice,
)
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field

log = logging.getLogger("seedcast.server")
MAX_CACHED_EVALUATORS = 32  # evaluators a server keeps built, by spec


class InferenceServicer(pb_grpc.InferenceServerServicer):
    """Implements the InferenceServer service over a Backend."""

    def __init__(
        self, backend: Backend, limits: Limits | None = None, registry: CollectorRegistry | None = None
    ) -> None:
        self.backend = backend
        self.limits = limits or Limits()
        info = backend.info()
        # A private registry unless the caller exports one: several servers may share a test process.
        self.metrics = ServerMetrics(info.backend, info.model, registry or CollectorRegistry())
        self.step = 0
        self.fingerprint = backend.fingerprint()
        # The fingerprint before the latest step ("" at step 0, or after a Sync refused partway): a resumed
        # optimizer whose log lacks the fingerprint after its last step checks the servers that hold it by this.
        self.parent_fingerprint = ""
        self.batches_members = backend.info().batches_members  # a backend's capability, fixed once it has loaded
        self._lock = asyncio.Lock()
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seedcast-backend")
        self._evaluators: dict[str, Evaluator] = {}
        self.broken: str | None = None  # set when an update failed midway; the server then refuses work

    def _check_intact(self) -> None:
        if self.broken:
            raise RequestError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"this server's weights are inconsistent ({self.broken}); restart it",
            )

    async def _on_worker(self, function, /, *args: Any, **kwargs: Any) -> Any:
        """`function(*args, stop=..., **kwargs)` on the backend worker; the caller holds the lock. When the RPC is
        cancelled meanwhile (its client went away or its deadline passed), `stop` ends the generation at its next
        decoding step, and the cancellation goes on only once the worker is free: the lock is never released
        while the worker still runs, and no cheap cancelled request holds the server for a whole generation."""
        stop = threading.Event()
        work = asyncio.get_running_loop().run_in_executor(self._worker, partial(function, *args, stop=stop, **kwargs))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait([work])
            if not work.cancelled():
                work.exception()  # GenerationStopped, expected: retrieved so asyncio does not report it
            raise

    def _evaluator(self, spec: str) -> Evaluator:
        if not self.limits.evaluator_allowed(spec):
            raise RequestError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"evaluator {spec!r} is not allowed on this server; start it with "
                f"`seedcast serve --allow-evaluator {spec}`",
            )
        if spec not in self._evaluators:
            try:
                evaluator = load_evaluator(spec)
            except Exception as error:
                raise RequestError(grpc.StatusCode.INVALID_ARGUMENT, f"evaluator {spec!r}: {error}") from error
            if len(self._evaluators) >= MAX_CACHED_EVALUATORS:  # prefix allowances admit endless specs: bounded
                del self._evaluators[next(iter(self._evaluators))]  # the oldest
            self._evaluators[spec] = evaluator
        return self._evaluators[spec]

    def _tokenizer(self):
        """The backend's tokenizer, whose chat template formats conversations (None for a test double)."""
        return getattr(self.backend, "tokenizer", None)

    async def _refuse(self, context: grpc.aio.ServicerContext, method: str, error: RequestError) -> None:
        self.metrics.rpc_error(method, error.code.name)
        await context.abort(error.code, error.message)

    async def Evaluate(self, request_iterator, context: grpc.aio.ServicerContext):
        """Answer each MemberTask of the stream with a result or a failure, in order."""
        batch: pb.PromptBatch | None = None
        inputs: ProblemInputs | None = None
        evaluator: Evaluator | None = None
        async for request in request_iterator:
            try:
                if request.HasField("batch"):
                    check_request_texts(request.batch, self.limits)
                    evaluator = await asyncio.get_running_loop().run_in_executor(
                        None, self._evaluator, request.batch.evaluator
                    )
                    inputs = await asyncio.get_running_loop().run_in_executor(
                        None, problem_inputs, request.batch, self._tokenizer()
                    )
                    batch = request.batch
                    continue
                if request.HasField("tasks"):
                    count = len(request.tasks.tasks)
                    if not 1 <= count <= self.limits.max_tasks_per_message:
                        raise RequestError(
                            grpc.StatusCode.INVALID_ARGUMENT,
                            f"MemberTasks must hold 1 to {self.limits.max_tasks_per_message} tasks, got {count}",
                        )
                    tasks = list(request.tasks.tasks)
                elif request.HasField("task"):
                    tasks = [request.task]
                else:
                    raise RequestError(
                        grpc.StatusCode.INVALID_ARGUMENT, "EvaluateRequest holds neither batch, task nor tasks"
                    )
                self._check_intact()
                checked = [(task, check_task(task, batch, self.step, self.limits)) for task in tasks]
                together = request.HasField("tasks") and request.tasks.batched
                if together:
                    check_batched(tasks, self.batches_members)
            except RequestError as error:
                await self._refuse(context, "Evaluate", error)
            if together:
                answers = await self._evaluate_together(batch, inputs, evaluator, checked)
            else:
                answers = [await self._evaluate(batch, inputs, evaluator, task, sampling) for task, sampling in checked]
            yield (
                answers[0]
                if request.HasField("task")
                else pb.EvaluateResponse(batch=pb.EvaluateResponses(responses=answers))
            )

    async def _evaluate_together(self, batch, inputs, evaluator, checked) -> list[pb.EvaluateResponse]:
        """Low-rank members in one batched generation; each is answered with its own result or failure."""
        tasks = [task for task, _ in checked]
        members = [BatchMember(seed=t.seed, sigma=t.sigma, sign=t.sign, rank=t.rank) for t in tasks]
        try:
            async with self._lock:
                if any(task.expected_step != self.step for task in tasks):
                    raise RuntimeError(f"the server moved to step {self.step} while the members waited")
                outcomes = await self._on_worker(
                    evaluate_members_batched,
                    self.backend,
                    evaluator,
                    prompts=inputs.prompts,
                    scoring=inputs.scoring,
                    system_prompt=batch.system_prompt,
                    members=members,
                    sampling_seeds=[t.sampling.seed for t in tasks],
                    sampling=checked[0][1],
                    pass_at_k=tasks[0].pass_at_k,
                )
        except Exception as error:  # generation or scoring failed: every member of the batch failed
            log.warning("%d batched members of iteration %d failed: %s", len(tasks), tasks[0].iteration, error)
            self.metrics.members_failed.inc(len(tasks))
            return [member_failure(task, error) for task in tasks]
        for outcome in outcomes:
            self._record(outcome)
        return [member_result(task, outcome) for task, outcome in zip(tasks, outcomes, strict=True)]

    async def _evaluate(self, batch, inputs, evaluator, task, sampling) -> pb.EvaluateResponse:
        part = inputs.part(shard_slice(task, len(batch.problems)))
        try:
            async with self._lock:
                # Checked again under the lock: an update may have run while this member waited.
                if task.expected_step != self.step:
                    raise RuntimeError(f"the server moved to step {self.step} while the member waited")
                outcome = await self._on_worker(
                    evaluate_member,
                    self.backend,
                    evaluator,
                    prompts=part.prompts,
                    scoring=part.scoring,
                    system_prompt=batch.system_prompt,
                    seed=task.seed,
                    sigma=task.sigma,
                    sign=task.sign,
                    sampling=sampling,
                    stochastic_rounding=task.stochastic_rounding,
                    rank=task.rank,
                    pass_at_k=task.pass_at_k,
                )
            self._record(outcome)
        except Exception as error:  # an evaluator or generation error fails this member only
            log.warning("member %d of iteration %d failed: %s", task.member, task.iteration, error)
            self.metrics.members_failed.inc()
            return member_failure(task, error)
        return member_result(task, outcome)

    def _record(self, outcome) -> None:
        metrics = self.metrics
        metrics.members_evaluated.inc()
        metrics.tokens_generated.inc(sum(outcome.completion_tokens))
        for phase in MEMBER_PHASES:
            metrics.phase_seconds[phase].observe(getattr(outcome, phase_field(phase)))

    async def _apply_steps(self, requests: list[pb.UpdateRequest]) -> None:
        """Validate and apply steps in order, under the lock; shielded by the callers, because a client
        that disconnects mid-update must not leave the weights updated but the step not counted."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            touched = False  # whether any step reached the weights
            applied, parent = self.step, self.parent_fingerprint
            try:
                for index, request in enumerate(requests):
                    self._check_intact()
                    update = check_update(request, applied, self.limits)
                    if index == 0:
                        before = self.fingerprint
                    elif index == len(requests) - 1:  # the last of several: one extra fingerprint per Sync
                        before = await loop.run_in_executor(self._worker, self.backend.fingerprint)
                    else:
                        before = ""
                    with self.metrics.phase_seconds["update"].time():
                        touched = True
                        try:
                            await loop.run_in_executor(
                                self._worker,
                                self.backend.apply_update,
                                update.terms,
                                update.rule,
                                update.params,
                                update.rank,
                            )
                        except Exception as error:
                            # Some tensors may hold the step and others not: never serve these weights.
                            self.broken = f"step {request.step} failed midway ({type(error).__name__}: {error})"
                            log.error("weights are inconsistent: %s; restart this server", self.broken)
                            raise RequestError(grpc.StatusCode.INTERNAL, self.broken) from error
                    applied, parent = request.step, before
                    self.metrics.updates_applied.inc()
            finally:
                # Also after a refusal or a failure partway: the fingerprint always describes the weights held.
                # Step and fingerprint are published together, once both are known, so GetState never pairs a
                # step with another step's fingerprint (a healthy server caught mid-Sync would be fenced).
                if touched:
                    fingerprint = await loop.run_in_executor(self._worker, self.backend.fingerprint)
                    self.step, self.fingerprint, self.parent_fingerprint = applied, fingerprint, parent
                    self.metrics.step.set(applied)

    async def ApplyUpdate(self, request: pb.UpdateRequest, context: grpc.aio.ServicerContext) -> pb.UpdateReply:
        """Apply the next update step and answer with the new fingerprint."""
        try:
            await asyncio.shield(self._apply_steps([request]))
        except RequestError as error:
            await self._refuse(context, "ApplyUpdate", error)
        log.info("applied step %d (%d terms), fingerprint %s", self.step, len(request.terms), self.fingerprint)
        return pb.UpdateReply(step=self.step, weights_fingerprint=self.fingerprint)

    async def Sync(self, request_iterator, context: grpc.aio.ServicerContext) -> pb.UpdateReply:
        """Replay a run of steps (a restarted server catching up), then answer with the fingerprint."""
        requests: list[pb.UpdateRequest] = []
        terms = 0
        async for request in request_iterator:
            # Each step is checked as it arrives (as the step it would be after the ones before it), so a bad
            # stream is refused at its first bad message, before anything is applied or buffered further.
            terms += len(request.terms)
            try:
                if len(requests) >= self.limits.max_sync_steps or terms > self.limits.max_sync_terms:
                    raise RequestError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"at most {self.limits.max_sync_steps} steps and {self.limits.max_sync_terms} terms per "
                        "Sync call; sync in several calls",
                    )
                check_update(request, self.step + len(requests), self.limits)
            except RequestError as error:
                await self._refuse(
                    context, "Sync", RequestError(error.code, f"{error.message} (server still at step {self.step})")
                )
            requests.append(request)
        first = self.step
        try:
            await asyncio.shield(self._apply_steps(requests))
        except RequestError as error:
            # Steps before the bad one stay applied (each was valid); the answer says where it stopped.
            await self._refuse(
                context, "Sync", RequestError(error.code, f"{error.message} (server now at step {self.step})")
            )
        log.info("synced steps %d..%d, fingerprint %s", first + 1, self.step, self.fingerprint)
        return pb.UpdateReply(step=self.step, weights_fingerprint=self.fingerprint)

    async def GetState(self, request: pb.StateRequest, context: grpc.aio.ServicerContext) -> pb.ServerState:
        """The step, fingerprint and what the backend holds; and whether the evaluator the request names can be built
        here (off the event loop, as Evaluate builds it)."""
        evaluator_problem = ""
        try:
            check_evaluator_length(request.evaluator, self.limits)
        except RequestError as error:
            await self._refuse(context, "GetState", error)
        if request.evaluator:
            try:
                await asyncio.get_running_loop().run_in_executor(None, self._evaluator, request.evaluator)
            except RequestError as error:
                evaluator_problem = error.message
        info = self.backend.info()
        return pb.ServerState(
            step=self.step,
            weights_fingerprint=self.fingerprint,
            parent_fingerprint=self.parent_fingerprint,
            model=info.model,
            backend=info.backend,
            device=info.device,
            dtype=info.dtype,
            parameters=info.parameters,
            noise=info.noise,
            batches_members=info.batches_members,
            evaluator_problem=evaluator_problem,
            lowrank_targets=info.lowrank_targets,
        )

    async def Sample(self, request: pb.SampleRequest, context: grpc.aio.ServicerContext) -> pb.SampleReply:
        """n completions per problem on the current weights, scored when an evaluator is named."""
        try:
            self._check_intact()
            check_request_texts(request, self.limits)
            sampling = sampling_from_proto(request.sampling, self.limits)
            evaluator = self._evaluator(request.evaluator) if request.evaluator else None
            if request.return_entropy and not self.backend.supports_entropy:
                raise RequestError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"the {self.backend.info().backend} backend cannot compute full-distribution "
                    "token entropy; sample without it or use hf servers",
                )
            inputs = await asyncio.get_running_loop().run_in_executor(None, problem_inputs, request, self._tokenizer())
        except RequestError as error:
            await self._refuse(context, "Sample", error)
        async with self._lock:
            completions = await self._on_worker(
                self.backend.generate, inputs.prompts, sampling, request.system_prompt, request.return_entropy
            )
        self.metrics.samples_served.inc(sum(len(group) for group in completions))
        self.metrics.tokens_generated.inc(sum(c.tokens for group in completions for c in group))
        if evaluator is not None:
            rewards = await asyncio.get_running_loop().run_in_executor(
                None, score_completions, evaluator, inputs.scoring, completions
            )
        else:
            rewards = [[None] * len(group) for group in completions]
        reply = pb.SampleReply(step=self.step)
        for group, group_rewards in zip(completions, rewards, strict=True):
            reply.problems.append(
                pb.ProblemSamples(
                    completions=[c.text for c in group],
                    rewards=[float("nan") if r is None else r for r in group_rewards],
                    completion_tokens=[c.tokens for c in group],
                    truncated=[c.truncated for c in group],
                    mean_token_entropy=[c.mean_entropy for c in group] if request.return_entropy else [],
                )
            )
        return reply

    def close(self) -> None:
        """Stop the backend worker thread."""
        self._worker.shutdown(wait=False, cancel_futures=True)
