"""`seedcast compare`: one report on base, ES and GRPO models — what the ES papers measure, side by side.

    seedcast compare base=smollm2-135m-instruct es=runs/es grpo=runs/grpo --task synthetic --limit 64 \\
        --n 16 --max-tokens 16 --out reports/es-vs-grpo

Each entry is `[LABEL=]PATH`. PATH is an eval folder (with results.json, reused as is), an ES run, a
GRPO run, a model folder or a model spec. Entries that are not eval folders are evaluated with
`seedcast eval` under the same options (same problems, same samples budget, same seeds), cached in
OUT/evals/LABEL. The report (OUT/report.md, compare.json, PNGs) has:

- pass@k curves with 95% bootstrap intervals, and paired differences against the first entry
  (the same problems resampled together, so shared difficulty cancels);
- mean token entropy, distinct final answers per problem, completion length, truncation;
- for runs: reward curves against generated tokens, wall time, peak memory, and the parameter
  geometry versus the run's base model (relative L2, fraction changed, per module group).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import statistics
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from seedcast.optimizer.run_dir import RunDirectory
from seedcast.optimizer.run_kinds import model_folder, run_kind, started_from
from seedcast.studies.pass_at_k import bootstrap_interval, pass_at_k
from seedcast.studies.reward_hacking import stated_wrong_result_rate

log = logging.getLogger("seedcast.compare")


@dataclass
class Entry:
    """One compared model: where it is, what it is, and what was measured."""

    label: str
    path: str
    kind: str  # eval | es | grpo | model | spec
    results: dict | None = None
    per_problem_correct: list[list[bool]] | None = None
    per_problem_entropy: list[float] | None = None  # mean token entropy of each problem's samples
    training: dict = field(default_factory=dict)
    geometry: dict | None = None


def parse_entry(text: str) -> Entry:
    """`LABEL=PATH` or `PATH` (the label is then the folder's name)."""
    label, sep, path = text.partition("=")
    if not sep:
        label, path = Path(text.rstrip("/")).name or text, text
    folder = Path(path)
    if (folder / "results.json").is_file():
        kind = "eval"
    elif folder.is_dir():
        kind = run_kind(folder)
    else:
        kind = "spec"  # the bundled alias or a hub id: resolved when the servers load it
    return Entry(label=label, path=path, kind=kind)


def load_eval(entry: Entry, folder: Path) -> None:
    """Read results.json and the per-sample rewards in samples.jsonl; without samples.jsonl (an evaluation too
    large to commit its samples), the per-problem counts and entropies results.json keeps."""
    entry.results = json.loads((folder / "results.json").read_text())
    threshold = entry.results.get("correct_threshold", 0.5)
    samples = folder / "samples.jsonl"
    kept = entry.results.get("per_problem")
    if not samples.is_file() and kept:
        n = entry.results["samples_per_problem"]
        entry.per_problem_correct = [[True] * count + [False] * (n - count) for count in kept["correct"]]
        if all(e is not None for e in kept["mean_token_entropy"]):
            entry.per_problem_entropy = kept["mean_token_entropy"]
    elif samples.is_file():
        rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
        entry.per_problem_correct = [
            [r is not None and not math.isnan(r) and r >= threshold for r in row["rewards"]] for row in rows
        ]
        if rows and all(row.get("entropies") for row in rows):  # evaluations made with entropy, since it was saved
            entry.per_problem_entropy = [statistics.fmean(row["entropies"]) for row in rows]
        hacked = stated_wrong_result_rate(rows, entry.results.get("evaluator"))
        if hacked is not None:
            entry.results["stated_wrong_result_rate"] = hacked


def paired_difference(a: list[list[bool]], b: list[list[bool]], k: int, seed: int = 0) -> dict:
    """pass@k(b) − pass@k(a) over the same problems, with a paired percentile-bootstrap 95% interval."""
    if len(a) != len(b):
        raise ValueError(f"the evaluations cover different problem counts ({len(a)} vs {len(b)})")
    diffs = [pass_at_k(len(y), sum(y), k) - pass_at_k(len(x), sum(x), k) for x, y in zip(a, b, strict=True)]
    low, high = bootstrap_interval(diffs, seed=seed)
    return {"mean": statistics.fmean(diffs), "ci95": [low, high], "significant": low > 0 or high < 0}


def training_info(entry: Entry) -> dict:
    """Reward curve, tokens, wall time and memory of an ES or GRPO run. A run started from another's
    weights (`--init-from`, e.g. the GRPO half of a hybrid) counts that run's wall time, completions and
    tokens too (`started_from` names it): its budget is the whole chain's."""
    info = _own_training_info(entry)
    prior = started_from(entry.path)
    if prior is not None:
        earlier = training_info(Entry(label=entry.label, path=str(prior), kind=run_kind(prior)))
        for key in ("wall_seconds", "completions", "completion_tokens"):
            info[key] = (info[key] or 0) + (earlier[key] or 0)
        info["started_from"] = [str(prior), *earlier.get("started_from", [])]
    return info


def _own_training_info(entry: Entry) -> dict:
    run = RunDirectory(entry.path)
    rows = run.metrics()
    summary = run.summary()
    tokens, curve, evals = 0, [], []
    for row in rows:
        tokens += row.completion_tokens or 0
        if row.reward_mean is not None:
            curve.append([tokens, row.reward_mean])
        if row.eval_reward is not None:
            evals.append([tokens, row.eval_reward])
    completions = sum(r.completions or 0 for r in rows)
    if not completions and entry.kind == "es":  # ES rows count members; every member answers the whole batch
        config = run.load_config()
        per_member = config.batch_size * config.sampling.samples_per_prompt
        completions = sum((r.members_ok or 0) + (r.members_failed or 0) for r in rows) * per_member
    return {
        "method": entry.kind,
        "steps": sum(1 for r in rows if not r.is_baseline),
        "completions": completions,
        "wall_seconds": summary.wall_seconds if summary else sum(r.seconds or 0.0 for r in rows),
        "completion_tokens": tokens,
        "peak_rss_bytes": summary.peak_rss_bytes if summary else None,
        "peak_memory_of": "the GRPO training process" if entry.kind == "grpo" else "one ES inference server",
        "machine": summary.machine if summary else None,  # where its wall time was measured
        "train_reward_curve": curve,
        "eval_reward_curve": evals,
    }


def base_model_of(entry: Entry) -> str:
    """The weights a run's chain started from: its config's model.name, or for a run started from another
    run's weights (`--init-from`), that run's base, so a hybrid's geometry is measured from the base model."""
    prior = started_from(entry.path)
    if prior is not None:
        return base_model_of(Entry(label=entry.label, path=str(prior), kind=run_kind(prior)))
    return RunDirectory(entry.path).load_config().model.name


def uncovered_training(entries: list[Entry], config, exclude_seeds: list[int]) -> list[str]:
    """What `--exclude-training-seeds` would miss: every run among the entries (and every run it started from)
    must have trained on one of those seeds' streams of the evaluation's own problem set (task, level, size...),
    or its training problems are not the ones excluded."""
    from dataclasses import asdict

    def problem_set(task) -> dict:
        return {k: v for k, v in asdict(task.dataset_spec(0)).items() if k not in ("limit", "synthetic_seed")}

    wanted = problem_set(config.task)
    problems = []
    for entry in entries:
        run: Path | None = Path(entry.path) if entry.kind in ("es", "grpo") else None
        while run is not None:
            trained = RunDirectory(run).load_config()
            if trained.seed not in exclude_seeds:
                problems.append(f"{entry.label}: {run} trained on seed {trained.seed}")
            differing = [
                f"{k}={v!r} (evaluated: {wanted[k]!r})" for k, v in problem_set(trained.task).items() if v != wanted[k]
            ]
            if differing:
                problems.append(f"{entry.label}: {run} trained on other problems, {', '.join(differing)}")
            run = started_from(run)
    return problems


def model_spec_of(entry: Entry, out: Path) -> str:
    """What servers load for this entry (an ES run is exported to OUT/models/LABEL once, then reused)."""
    if entry.kind == "spec":
        return entry.path
    return str(Path(model_folder(entry.path, export_to=out / "models" / entry.label)).resolve())


ENTRY_FILE = "entry.json"  # beside a cached evaluation: which weights it measured
GEOMETRY_FILE = "geometry.json"  # beside a cached evaluation: the entry's parameter geometry


def entry_identity(entry: Entry) -> str:
    """What names an entry's weights for the caches: a run's config and summary (a run made again, even with
    the same settings, has another summary), else the path or spec as given."""
    if entry.kind in ("es", "grpo"):
        run = Path(entry.path)
        digest = hashlib.sha256()
        for name in ("config.yaml", "summary.json"):
            digest.update((run / name).read_bytes() if (run / name).is_file() else b"")
        return f"{entry.kind}:{digest.hexdigest()[:16]}"
    return f"{entry.kind}:{entry.path}"


def _cache_matches(folder: Path, entry: Entry) -> bool:
    recorded = folder / ENTRY_FILE
    return recorded.is_file() and json.loads(recorded.read_text()).get("identity") == entry_identity(entry)


def recorded_alike(recorded: dict | None, wanted: dict, kind: type) -> bool:
    """Whether a record written into results.json (`recorded`) names what `wanted` names, both `asdict` of a
    `kind` dataclass (DatasetSpec, EvalOptions). A field added to `kind` since the record was written counts as
    its default there: its default keeps the earlier behaviour, so a cache outlives the field's arrival."""
    if recorded is None:
        return False
    defaults = {
        f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        for f in fields(kind)
        if f.default is not MISSING or f.default_factory is not MISSING
    }
    missing = object()
    return set(recorded) <= set(wanted) and all(
        recorded.get(name, defaults.get(name, missing)) == value for name, value in wanted.items()
    )


def _cached_dtype_serves(recorded: dict, dtype: str) -> bool:
    """Whether a cached evaluation was sampled in the dtype asked for: any, under `auto` (a cache made on another
    kind of machine is reused, and the report flags mixed inference); else the very one (`--set model.dtype=...`)."""
    return dtype == "auto" or (recorded.get("inference") or {}).get("dtype") == dtype


def evaluate_entries(
    entries: list[Entry],
    out: Path,
    make_config,
    options,
    dataset: dict,
    dtype: str = "auto",
    scoring: tuple[str, str] | None = None,
    sample_until: float | None = None,
) -> None:
    """Fill each entry's results: read eval folders, evaluate the rest (cached in OUT/evals/LABEL, reused only
    for the same weights, made with the same options on the same problems, `dataset` as
    `evaluate.dataset_record` gives it, in the inference `dtype` asked for unless `auto`, and scored by
    `scoring`'s evaluator with its instruction when given). A cache scored by another built-in evaluator that
    asked the same way is scored again without sampling (studies/rescore.py). A cache outlives the weights: a
    GRPO run whose model/ is gone is still compared through it. With `sample_until` (a timestamp) an evaluation
    starts no Sample call that would not end by then, and `EvaluationPaused` stops the comparison there."""
    from dataclasses import asdict

    from seedcast.evaluators.datasets import DatasetSpec
    from seedcast.studies.evaluate import EvalOptions, run_eval
    from seedcast.studies.rescore import can_rescore, recorded_instruction, rescore

    for entry in entries:
        if entry.kind == "eval":
            load_eval(entry, Path(entry.path))
            continue
        folder = out / "evals" / entry.label
        cached = folder / "results.json"
        recorded = json.loads(cached.read_text()) if cached.is_file() else {}
        same_run = _cache_matches(folder, entry)
        same_samples = (
            same_run
            and recorded_alike(recorded.get("options"), asdict(options), EvalOptions)
            and recorded_alike(recorded.get("dataset"), dataset, DatasetSpec)
            and _cached_dtype_serves(recorded, dtype)
        )
        scored_alike = scoring is None or (recorded.get("evaluator"), recorded_instruction(recorded)) == scoring
        if same_samples and scored_alike:
            log.info("%s: reusing %s", entry.label, cached)
        elif same_samples and (folder / "samples.jsonl").is_file() and can_rescore(recorded, *scoring):
            log.info("%s: scoring %s again under %s", entry.label, cached, scoring[0])
            rescore(folder, scoring[0])
        else:
            log.info("%s: evaluating %s", entry.label, entry.path)
            model = model_spec_of(entry, out)  # fails for weights that are gone, before anything cached is touched
            if not same_run:
                (folder / GEOMETRY_FILE).unlink(missing_ok=True)  # measured on other weights
            asyncio.run(run_eval(make_config(model), options, folder, sample_until))
            (folder / ENTRY_FILE).write_text(json.dumps({"path": entry.path, "identity": entry_identity(entry)}) + "\n")
        load_eval(entry, folder)


def measure_geometry(entries: list[Entry], threshold: float, out: Path) -> None:
    """Parameter geometry of every run versus the model it started from (base weights loaded once each; an
    ES run's weights come from the folder its evaluation exported, instead of a second replay). Cached beside
    the entry's evaluation (OUT/evals/LABEL/geometry.json) for the same weights and threshold."""
    from seedcast.studies.geometry import load_weights, parameter_geometry

    bases: dict[str, dict] = {}
    for entry in entries:
        if entry.kind not in ("es", "grpo"):
            continue
        folder = out / "evals" / entry.label
        cached = folder / GEOMETRY_FILE
        if cached.is_file() and _cache_matches(folder, entry):
            recorded = json.loads(cached.read_text())
            if recorded.get("threshold") == threshold:
                entry.geometry = recorded
                continue
        base = base_model_of(entry)
        if base not in bases:
            bases[base] = load_weights(base)
        tuned = load_weights(model_spec_of(entry, out))
        entry.geometry = {"base": base, **parameter_geometry(bases[base], tuned, threshold)}
        if (folder / ENTRY_FILE).is_file():
            cached.write_text(json.dumps(entry.geometry) + "\n")
