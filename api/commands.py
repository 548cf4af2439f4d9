"""What each `seedcast` subcommand does with its parsed arguments (cli.py parses and dispatches).

Each command calls the Python API (runs.py) and only adds what a terminal needs: printing, plots.
Heavy modules are imported inside each command, so `seedcast --help` stays fast.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path


def train(args: argparse.Namespace) -> int:
    from seedcast.optimizer.config import ConfigError
    from seedcast.optimizer.config_files import config_reference
    from seedcast.runs import new_run_dir, resume
    from seedcast.runs import train as train_run

    if args.help_config:
        print("\n".join(config_reference()))
        return 0
    overrides = list(args.overrides)
    if args.servers is not None:
        overrides.append(f"fleet.servers=[{args.servers}]")
        if args.local is None:
            overrides.append("fleet.local=0")
    if args.local is not None:
        overrides.append(f"fleet.local={args.local}")
    if args.metrics_port is not None:
        overrides.append(f"metrics_port={args.metrics_port}")
    started = time.perf_counter()
    progress = not args.no_progress
    if args.resume and (args.config or args.init_from or args.run_dir):
        raise ConfigError(
            "--resume continues in its run directory with its config and weights; drop --config / --init-from / "
            "--run-dir"
        )
    run_path = Path(args.resume) if args.resume else new_run_dir(args.run_dir)
    try:
        if args.resume:
            result = resume(args.resume, overrides=overrides, show_progress=progress)
        else:
            result = train_run(
                args.config, run_path, overrides=overrides, init_from=args.init_from, show_progress=progress
            )
    except KeyboardInterrupt:
        if (run_path / "updates.jsonl").exists():
            print(f"\ninterrupted; continue with `seedcast train --resume {run_path}`", file=sys.stderr)
        raise
    plot = result.reward_curve  # drawn by the run, as from Python
    rows = [r for r in result.metrics if r.reward_mean is not None]
    evals = [r for r in result.metrics if r.eval_reward is not None]
    print(
        f"\nfinished {result.iterations} iterations in {time.perf_counter() - started:.0f} s; "
        f"fingerprint {result.fingerprint}"
    )
    if rows:
        print(f"population reward: first iteration {rows[0].reward_mean:.3f} -> last {rows[-1].reward_mean:.3f}")
    failed = sum(r.members_failed or 0 for r in result.metrics)
    truncated = sum(r.truncated_answers or 0 for r in result.metrics)
    if failed or truncated:
        print(
            f"{failed} members failed; {truncated} member answers stopped at sampling.max_new_tokens "
            "(raise it if answers need more room); per iteration in metrics.jsonl"
        )
    if len(evals) >= 2:
        print(
            f"eval reward (unperturbed, greedy): base {evals[0].eval_reward:.3f} -> final {evals[-1].eval_reward:.3f}"
        )
    print(f"run directory: {run_path}  (reward curve: {plot}; export with `seedcast export {run_path} --out DIR`)")
    return 0


def grpo(args: argparse.Namespace) -> int:
    from seedcast.optimizer.run_dir import RunDirectory
    from seedcast.runs import grpo as grpo_run
    from seedcast.runs import new_run_dir
    from seedcast.studies.plots import reward_curve_after_run

    run_dir = new_run_dir(args.run_dir)
    summary = grpo_run(
        args.config,
        run_dir,
        overrides=list(args.overrides),
        init_from=args.init_from,
        show_progress=not args.no_progress,
    )
    run = RunDirectory(run_dir)
    drawn = run.path / "reward_curve.png"
    plot = str(drawn) if drawn.exists() else reward_curve_after_run(run.path)  # the reason when it was not drawn
    evals = [r for r in run.metrics() if r.eval_reward is not None]
    print(
        f"\nfinished {summary.steps} GRPO steps in {summary.wall_seconds:.0f} s; peak memory "
        f"{summary.peak_rss_bytes / 2**30:.2f} GiB; {summary.completion_tokens} completion tokens"
    )
    if len(evals) >= 2:
        print(f"eval reward (greedy): base {evals[0].eval_reward:.3f} -> final {evals[-1].eval_reward:.3f}")
    print(f"run directory: {run.path}  (model: {summary.model_dir}; reward curve: {plot})")
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from seedcast.runs import evaluate as evaluate_model

    results = evaluate_model(
        args.model,
        args.out,
        task=args.task,
        limit=args.limit,
        overrides=args.overrides,
        data=args.data,
        evaluator=args.evaluator,
        servers=args.servers,
        local=args.local,
        options=eval_options(args),
        sample_until=args.sample_until,
    )
    curve = ", ".join(f"pass@{k}={row['mean']:.3f}" for k, row in results["pass_at_k"].items())
    entropy = results["mean_token_entropy"]
    print(
        f"{results['problems']} problems x {args.n} samples: {curve}; mean token entropy "
        f"{'n/a' if entropy is None else f'{entropy:.3f} nats'}; distinct answers/problem "
        f"{results['distinct_answers_per_problem']:.2f}; truncated {results['truncation_rate']:.1%}"
    )
    print(f"wrote {args.out}/results.json, samples.jsonl and pass_at_k.png")
    return 0


def compare(args: argparse.Namespace) -> int:
    from seedcast.inference_server.model_source import BUNDLED_MODEL
    from seedcast.optimizer.config import ConfigError
    from seedcast.studies.compare import (
        evaluate_entries,
        measure_geometry,
        parse_entry,
        training_info,
        uncovered_training,
    )
    from seedcast.studies.evaluate import dataset_record, eval_config
    from seedcast.studies.report import write_report

    entries = [parse_entry(text) for text in args.entries]
    labels = [e.label for e in entries]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"labels must differ, got {labels}; name entries as LABEL=PATH")
    out = Path(args.out)
    options = eval_options(args)

    def make_config(model: str):
        return eval_config(
            model, args.task, args.data, args.evaluator, args.limit, args.seed, local=args.local, overrides=args.set
        )

    checked = make_config(BUNDLED_MODEL)  # config errors (e.g. an unknown task) are reported before any model loads
    uncovered = uncovered_training(entries, checked, options.exclude_seeds) if options.exclude_seeds else []
    if uncovered:
        raise ConfigError(
            f"--exclude-training-seeds {args.exclude_training_seeds} would not exclude every training problem: "
            + "; ".join(uncovered)
            + ". Exclude those seeds too, or evaluate on the problem set the runs trained on (--task, --set)"
        )
    scoring = (checked.task.evaluator_spec(), checked.task.instruction_text())
    evaluate_entries(
        entries, out, make_config, options, dataset_record(checked), checked.model.dtype, scoring, args.sample_until
    )
    if not args.no_geometry:
        measure_geometry(entries, args.delta_threshold, out)
    if args.evaluate_only:
        print(f"evaluated {', '.join(labels)} into {out}/evals (no report: a later compare reuses them)")
        return 0
    for entry in entries:
        if entry.kind in ("es", "grpo"):
            entry.training = training_info(entry)
    command = shlex.join(["seedcast", *args.argv])
    write_report(entries, out, command)
    print((out / "report.md").read_text())
    if args.claims:
        from seedcast.studies.claims import group_entries, write_claims
        from seedcast.studies.claims_plot import plot_group_curves
        from seedcast.studies.claims_report import append_claims_to_report, write_claims_report

        part = write_claims(Path(args.claims), args.claims_task or args.task, entries, options.ks, command)
        found = next((c["crossover"] for c in part["claims"] if "crossover" in c), {})
        crossovers = {name: where["k"] for name, where in found.items()}
        groups_plot = plot_group_curves(
            group_entries(entries), max(options.ks), out / "pass_at_k_groups.png", crossovers
        )
        append_claims_to_report(out / "report.md", args.claims_task or args.task, part, groups_plot.name)
        for claim in part["claims"]:
            print(f"claim {claim['claim']}: {claim['verdict']}")
        report = write_claims_report(Path(args.claims))
        print(f"wrote the {args.claims_task or args.task} claims to {args.claims} (tables: {report})")
    print(f"wrote {out}/report.md, compare.json and plots")
    return 0


def export(args: argparse.Namespace) -> int:
    from seedcast.runs import export as export_run

    summary = export_run(
        args.run_dir,
        args.out,
        device=args.device,
        dtype=args.dtype,
        steps=args.steps,
        show_progress=True,
        push_to_hub=args.push_to_hub,
        private=args.private,
    )
    match = summary["matches_servers"]
    verdict = "" if match is None else f" ({'matches' if match else 'DIFFERS FROM'} the servers' fingerprint)"
    print(f"wrote {args.out}: {summary['steps']} steps replayed, fingerprint {summary['fingerprint']}{verdict}")
    if "pushed_to" in summary:
        print(f"pushed to {args.push_to_hub}: {summary['pushed_to']}")
    return 0 if summary["matches_servers"] is not False else 1


def plot(args: argparse.Namespace) -> int:
    from seedcast.studies.plots import plot_reward_curve

    print(plot_reward_curve(args.run_dir, args.out))
    return 0


def eval_options(args: argparse.Namespace):
    """EvalOptions from the options `cli._add_sampling_options` defines."""
    from seedcast.studies.evaluate import EvalOptions

    return EvalOptions(
        n=args.n,
        ks=sorted({int(k) for k in args.k.split(",")}),
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        entropy=not args.no_entropy,
        seed=args.seed,
        exclude_seeds=[int(s) for s in args.exclude_training_seeds.split(",") if s.strip()],
    )
