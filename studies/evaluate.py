"""`seedcast eval`: n samples per problem through the inference servers, then what the ES papers
measure — pass@k (unbiased estimator, bootstrap intervals over problems), the mean token entropy of
the full next-token distribution (the logits the servers sample from, at temperature 1), distinct final answers per
problem, completion length and truncation rate. Writes results.json and a pass@k plot. An evaluation cut off goes on
where it stopped when run again (studies/eval_resume.py).

    seedcast eval --model smollm2-135m-instruct --task synthetic --limit 64 --n 16 --out evals/base
    seedcast eval --model exported/ --task gsm8k --data ../shared/data/gsm8k/test.jsonl --n 16 --out evals/es
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry
from tqdm import tqdm

from seedcast.evaluators.answers import last_boxed, last_number
from seedcast.evaluators.base import Problem
from seedcast.evaluators.datasets import DatasetError, load_problems
from seedcast.evaluators.tasks import problem_key
from seedcast.optimizer.atomic_file import write_atomically
from seedcast.optimizer.config import TrainConfig
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.seeds import derive_seed
from seedcast.optimizer.eval_set import wire_problem
from seedcast.optimizer.fleet.client import ServerClient
from seedcast.optimizer.fleet.for_run import fleet_for_run
from seedcast.optimizer.fleet.scheduler import FleetExhaustedError
from seedcast.optimizer.machine import machine_kind
from seedcast.optimizer.metrics import OptimizerMetrics
from seedcast.optimizer.trackers import check_installed, open_run_trackers
from seedcast.proto import seedcast_pb2 as pb
from seedcast.studies.eval_resume import TIMING_FILE, EvalProgress, EvaluationPaused, problem_records
from seedcast.studies.pass_at_k import bootstrap_interval, pass_at_k
from seedcast.studies.pass_at_k_plot import plot_pass_at_k
from seedcast.studies.reward_hacking import stated_wrong_result_rate

log = logging.getLogger("seedcast.eval")
CORRECT_THRESHOLD = 0.5  # a sample counts as correct for pass@k when its reward is at least this


@dataclass
class EvalOptions:
    """How to sample: n per problem, at this temperature / top-p / length; which k to report."""

    n: int = 16
    ks: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    entropy: bool = True
    problems_per_call: int = 4
    seed: int = 0
    # Held-out problems that a training run with one of these seeds (same task settings) could draw are
    # dropped before `task.limit` applies: for generated tasks, whose problems can repeat across seeds.
    exclude_seeds: list[int] = field(default_factory=list)


@dataclass
class ProblemOutcome:
    """Everything sampled for one problem."""

    rewards: list[float]
    tokens: list[int]
    truncated: list[bool]
    entropies: list[float]
    answers: list[str | None]


def final_answer(completion: str) -> str | None:
    """The answer a completion commits to: its last boxed content, else its last number."""
    boxed = last_boxed(completion)
    return boxed.strip() if boxed is not None else last_number(completion)


async def sample_all(
    clients: list[ServerClient],
    requests: list[pb.SampleRequest],
    show_progress: bool = True,
    on_reply: Callable[[int, pb.SampleReply], None] | None = None,
    already_done: int = 0,
    keep_going: Callable[[], bool] = lambda: True,
) -> list[pb.SampleReply | None]:
    """Send the requests over the servers, each taking the next request when free. A server whose
    call fails is dropped and its request goes to another; sampling seeds travel with the request,
    so the answer is the same whichever server gives it. `on_reply(index, reply)` is called as each
    request is answered (the resume record); the progress bar starts at `already_done` calls. No server
    takes another request once `keep_going()` is false: those left unmade are None."""
    replies: list[pb.SampleReply | None] = [None] * len(requests)
    queue = deque(enumerate(requests))
    live = list(clients)
    bar = tqdm(
        total=len(requests) + already_done,
        initial=already_done,
        desc="sampling",
        unit="call",
        disable=not show_progress,
    )

    async def worker(client: ServerClient) -> None:
        while queue and keep_going():
            index, request = queue.popleft()
            try:
                replies[index] = await client.sample(request)
            except grpc.aio.AioRpcError as error:
                log.warning(
                    "server %s failed a Sample call (%s); another server takes it", client.address, error.details()
                )
                queue.appendleft((index, request))
                live.remove(client)
                return
            if on_reply is not None:
                on_reply(index, replies[index])
            bar.update(1)

    while queue and keep_going():
        if not live:
            raise FleetExhaustedError(f"no inference server left with {len(queue)} Sample calls to make")
        await asyncio.gather(*(worker(client) for client in list(live)))
    bar.close()
    return replies


def summarize(outcomes: list[ProblemOutcome], options: EvalOptions) -> dict:
    """pass@k with intervals, entropy, diversity, length and truncation over all problems."""
    correct = [sum(r >= CORRECT_THRESHOLD for r in o.rewards if not math.isnan(r)) for o in outcomes]
    pass_rows = {}
    for k in [k for k in options.ks if k <= options.n]:
        per_problem = [pass_at_k(options.n, c, k) for c in correct]
        low, high = bootstrap_interval(per_problem, seed=options.seed)
        pass_rows[str(k)] = {"mean": statistics.fmean(per_problem), "ci95": [low, high]}
    entropies = [e for o in outcomes for e in o.entropies]
    tokens = [t for o in outcomes for t in o.tokens]
    finished = [
        r >= CORRECT_THRESHOLD
        for o in outcomes
        for r, cut in zip(o.rewards, o.truncated, strict=True)
        if not cut and not math.isnan(r)
    ]
    return {
        "problems": len(outcomes),
        "samples_per_problem": options.n,
        # What a comparison judges, kept here as well as in samples.jsonl: an evaluation too large to commit its
        # samples (n = 256) is still compared and judged again from results.json alone.
        "per_problem": {
            "correct": correct,
            "mean_token_entropy": [statistics.fmean(o.entropies) if o.entropies else None for o in outcomes],
        },
        "pass_at_k": pass_rows,
        "mean_token_entropy": statistics.fmean(entropies) if entropies else None,
        "entropy_estimate": "full next-token distribution, temperature 1" if entropies else None,
        "distinct_answers_per_problem": statistics.fmean(
            len({a for a in o.answers if a is not None}) for o in outcomes
        ),
        "mean_completion_tokens": statistics.fmean(tokens),
        "truncation_rate": statistics.fmean(t for o in outcomes for t in o.truncated),
        # Skill apart from format: how often an answer is right when the model finished it within the budget.
        "finished_accuracy": statistics.fmean(finished) if finished else None,
        "finished_samples": len(finished),
        "correct_threshold": CORRECT_THRESHOLD,
    }


def eval_config(
    model: str,
    task: str = "synthetic",
    data: str | None = None,
    evaluator: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    servers: str | None = None,
    local: int | None = None,
    overrides: list[str] | None = None,
) -> TrainConfig:
    """The config `seedcast eval` runs with: model and task from the arguments, `key=value` overrides last."""
    values = [f"model.name={model}", f"task.dataset={task}", f"seed={seed}"]
    if data:
        values.append(f"task.path={data}")
    if evaluator:
        values.append(f"task.evaluator={evaluator}")
    if limit:
        values.append(f"task.limit={limit}")
    if servers is not None:
        values += [f"fleet.servers=[{servers}]", f"fleet.local={local or 0}"]
    elif local is not None:
        values.append(f"fleet.local={local}")
    return load_config(overrides=[*values, *(overrides or [])])


def dataset_record(config: TrainConfig) -> dict:
    """Which problems an evaluation under this config draws (kind, file, difficulty, seed, limit...): recorded in
    results.json, so a cached evaluation is reused only for the same problems."""
    return asdict(config.task.dataset_spec(config.seed))


def held_out_problems(config: TrainConfig, exclude_seeds: list[int]) -> tuple[list[Problem], int]:
    """The problems to evaluate (at most `task.limit`), none of which a training run with one of `exclude_seeds`
    could have drawn; and how many were dropped for that. Problems are told apart as the task table says
    (`evaluators.tasks.problem_key`: Countdown's up to the order of their numbers, and then a held-out set holds
    each once; others by prompt)."""
    spec = config.task.dataset_spec(config.seed)
    problems = load_problems(replace(spec, limit=None))
    own_key = problem_key(spec.kind)
    key = own_key or _prompt
    seen = {
        key(p) for seed in exclude_seeds for p in load_problems(replace(config.task.dataset_spec(seed), limit=None))
    }
    kept = [p for p in problems if key(p) not in seen]
    if not kept:
        raise DatasetError(f"every problem of the evaluation set is also a training problem of seeds {exclude_seeds}")
    dropped = len(problems) - len(kept)
    if exclude_seeds and own_key:
        unique: dict[str, Problem] = {}
        for problem in kept:
            unique.setdefault(key(problem), problem)  # each problem once, where it first came
        kept = list(unique.values())
    if spec.limit and exclude_seeds and len(kept) < spec.limit:
        raise DatasetError(
            f"only {len(kept)} problems of the evaluation set are held out from seeds {exclude_seeds}, "
            f"fewer than the {spec.limit} asked for: use a larger level or task, or a smaller limit"
        )
    return kept[: spec.limit] if spec.limit else kept, dropped


def _prompt(problem: Problem) -> str:
    return problem.prompt


async def run_eval(config: TrainConfig, options: EvalOptions, out_dir: Path, sample_until: float | None = None) -> dict:
    """Start or connect the servers, sample, score, summarize; writes samples.jsonl, results.json, pass_at_k.png and
    timing.json (how long the sampling took, on which kind of machine). Resumable: each finished Sample call is
    kept in OUT/partial.jsonl (studies/eval_resume.py), and the same evaluation started again makes only the calls
    still missing. With `sample_until` (a timestamp) it starts no call that would not end by then, and raises
    `EvaluationPaused` if calls are left."""
    check_installed(config.report_to)  # before any sampling
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "logs").mkdir(exist_ok=True)
    problems, excluded = held_out_problems(config, options.exclude_seeds)
    instruction = config.task.instruction_text()
    evaluator = config.task.evaluator_spec()
    metrics = OptimizerMetrics(config.task.dataset, config.model.name, CollectorRegistry())
    fleet = fleet_for_run(config, out_dir / "logs", metrics)
    requests = []
    for start in range(0, len(problems), options.problems_per_call):
        chunk = problems[start : start + options.problems_per_call]
        requests.append(
            pb.SampleRequest(
                problems=[wire_problem(p, instruction) for p in chunk],
                evaluator=evaluator,
                **config.task.prompt_format(),
                return_entropy=options.entropy,
                sampling=pb.SamplingParams(
                    temperature=options.temperature,
                    top_p=options.top_p,
                    max_new_tokens=options.max_tokens,
                    samples_per_prompt=options.n,
                    seed=derive_seed(options.seed, "eval", start),
                ),
            )
        )
    header = {
        "evaluator": evaluator,
        "instruction": instruction,
        "dataset": dataset_record(config),
        "options": asdict(options),
        "problems": [p.problem_id for p in problems],
    }
    try:
        await fleet.start([])
        state = await fleet.active[0].state()  # what the samples were drawn with: a paired comparison needs one
        inference = {"backend": state.backend, "device": state.device, "dtype": state.dtype}
        # The server's fingerprint of the weights it loaded names them (no second read of the files).
        progress = EvalProgress(out_dir, {**header, "weights": state.weights_fingerprint, "inference": inference})
        done = progress.load()
        pending = [index for index in range(len(requests)) if index not in done]
        last_reply = [time.monotonic()]

        def keep(position: int, reply: pb.SampleReply) -> None:
            # Seconds since the previous reply: where several servers overlap their calls, these still add up
            # to the evaluation's wall time.
            now = time.monotonic()
            seconds, last_reply[0] = now - last_reply[0], now
            done[pending[position]] = problem_records(reply)
            progress.record(pending[position], done[pending[position]], seconds=seconds)

        await sample_all(
            fleet.active,
            [requests[i] for i in pending],
            on_reply=keep,
            already_done=len(done),
            keep_going=lambda: progress.call_fits(sample_until, time.time()),
        )
    finally:
        await fleet.close()
    if len(done) < len(requests):
        raise EvaluationPaused(out_dir, len(done), len(requests))
    records = [problem for index in range(len(requests)) for problem in done[index]]
    outcomes = [
        ProblemOutcome(
            rewards=r["rewards"],
            tokens=r["tokens"],
            truncated=r["truncated"],
            entropies=r["entropies"],
            answers=[final_answer(c) for c in r["completions"]],
        )
        for r in records
    ]
    results = {
        "model": config.model.name,
        "task": config.task.dataset,
        "evaluator": evaluator,
        "instruction": instruction,  # with the evaluator: whether these samples can be scored again (rescore.py)
        "dataset": header["dataset"],
        "options": header["options"],
        "excluded_as_training_problems": excluded,
        "inference": inference,
        **summarize(outcomes, options),
    }
    rows = [
        {
            "problem_id": problem.problem_id,
            "prompt": problem.prompt,
            "reference": problem.reference,
            **{key: record[key] for key in ("completions", "rewards", "entropies", "truncated")},
        }
        for problem, record in zip(problems, records, strict=True)
    ]
    hacked = stated_wrong_result_rate(rows, evaluator)
    if hacked is not None:
        results["stated_wrong_result_rate"] = hacked
    write_atomically(out_dir / "samples.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    timing = {**progress.timing(len(requests)), "machine": machine_kind()}  # how long its kind takes here
    write_atomically(out_dir / TIMING_FILE, json.dumps(timing, indent=2) + "\n")
    write_atomically(out_dir / "results.json", json.dumps(results, indent=2) + "\n")  # last: marks it complete
    progress.finish()
    plot_pass_at_k([(config.model.name, results)], out_dir / "pass_at_k.png")
    report_eval(config, results, out_dir)
    return results


def report_eval(config: TrainConfig, results: dict, out_dir: Path) -> None:
    """Send an evaluation's numbers to the trackers in `report_to` (step 0, in OUT's tensorboard/ or wandb/)."""
    scalars = {f"eval/pass@{k}": row["mean"] for k, row in results["pass_at_k"].items()}
    for key in ("mean_token_entropy", "distinct_answers_per_problem", "truncation_rate", "finished_accuracy"):
        if results.get(key) is not None:
            scalars[f"eval/{key}"] = results[key]
    trackers = open_run_trackers(config, out_dir)
    trackers.log(0, scalars)
    trackers.close()
