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
7. `compare`: `seedcast compare` of all of them on 128 held-out problems (a stream no training run draws
   from, nor any run's in-training eval, which picked GRPO's setting; problems a training seed could draw are
   dropped in code), n = 16 at T = 1 at the training token budget, writing the task's part of
   docs/results/claims.json; then again at 64 new tokens (n = 4, base, GRPO, ES at equal wall time and the
   control), where the base is rarely cut off, as `TASK-64-tokens`. Countdown runs at level 8 (two numbers up
   to 50): level 1's 251 problems are all in every training stream, so nothing there can be held out.

Every run is a `seedcast` command the plan prints, so any one can be repeated by hand. What survives a fresh
checkout is what is committed (bench/es_vs_grpo_files.py): each finished run's files except weights, copied to
docs/results/es-vs-grpo/TASK/NAME, and each run's evaluations for every comparison it belongs to, made as soon
as the run ends (`seedcast compare --evaluate-only`, while its weights exist) and copied to
docs/results/es-vs-grpo/TASK/COMPARISON/evals/LABEL; commit both as soon as a run ends. The bench restores them
into OUT first, so a later session neither trains a finished run again nor needs a GRPO run's weights. Wall
time is only comparable on one kind of machine: a run whose budget matches other runs' wall time is made only
where they were timed (summary.json records the machine), and the bench stops with both machines named if not.
With `--stop-by HH:MM` it starts no run that would not end by then (estimated from the task's finished runs,
else from bench/es_vs_grpo_time.py's per-machine defaults): a run cut short by the end of a session is lost. A
GRPO run's estimate counts its evaluations; an ES run's evaluations may wait for a later invocation, as its
update log rebuilds its weights.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from es_vs_grpo_files import PUBLISHED_ROOT, publish_compare, publish_evals, publish_run, restore
from es_vs_grpo_time import (
    PROBE,
    OutOfTime,
    es_seconds,
    evaluation_seconds,
    grpo_seconds,
    iterations_for_wall,
    require_same_machine,
    stop_time,
    summary,
)

# GRPO's grid per task. Synthetic's full grid picked its highest learning rate at T = 1.0 (final greedy eval
# 0.823 against 0.667-0.760 for the other three), so Countdown's, cut to two runs to fit the CPU budget, keeps
# T = 1.0 and moves the learning rate up around that winner.
SYNTHETIC_GRID = {"grpo.learning_rate": ["1e-5", "3e-5"], "grpo.temperature": ["0.7", "1.0"]}
COUNTDOWN_GRID = {"grpo.learning_rate": ["3e-5", "1e-4"], "grpo.temperature": ["1.0"]}
# Countdown's level: two numbers up to 50. Level 1 (up to 9) has only 251 distinct problems (138 up to order), all
# in every training seed's stream, so nothing at level 1 can be held out; its runs are kept, as the training-set
# result they are, in docs/results/es-vs-grpo/countdown-level-1/. Level 7 (up to 25) leaves 14 of the eval
# stream's 2,000 problems held out up to order; level 8 leaves 371.
COUNTDOWN_LEVEL = 8
TASKS = {
    "synthetic": {
        "overrides": [],
        "eval_overrides": [],
        "max_tokens": 16,
        "format_evaluator": "format-final-number",
        "grid": SYNTHETIC_GRID,
        "grpo_steps": 10,
    },
    "countdown": {
        "overrides": [
            "task.dataset=countdown",
            f"task.countdown_difficulty={COUNTDOWN_LEVEL}",
            "sampling.max_new_tokens=32",
        ],
        "eval_overrides": [f"task.countdown_difficulty={COUNTDOWN_LEVEL}"],  # compare's --task names the dataset
        "max_tokens": 32,
        "format_evaluator": "format-countdown",
        "grid": COUNTDOWN_GRID,
        # A level-8 GRPO step (256 completions of up to 32 tokens) took 808 s on a 2-core AVX2-only CPU, 3.1x the
        # avx512_bf16 machine's: 4 steps keep a GRPO run near an hour there, and split evenly for the hybrid.
        "grpo_steps": 4,
    },
}
GRPO_CONFIG = "configs/synthetic-cpu.yaml"
ES_CONFIG = "configs/es-best.yaml"
SEEDS = (0, 1, 2)
# The held-out stream. Training problems come from the run seeds 0-2 (and are excluded in code); the
# in-training eval sets from seeds 1_000_003-1_000_005 (seed 0's picked GRPO's setting), so not those either.
EVAL_SEED = 2_000_003
LONG_TOKENS, LONG_SAMPLES = 64, 4  # the second evaluation, where the base model is rarely cut off
STAGES = ("grid", "grpo", "probe", "es", "hybrid", "format", "compare")


@dataclass(frozen=True)
class Comparison:
    """One `seedcast compare` of the bench, on held-out problems: its folder under OUT/TASK, the name of its part
    of the claims file, its token budget and samples per problem, and which labels it compares (all when None)."""

    folder: str
    claims_suffix: str
    tokens: int | None  # None: the task's training budget
    n: int
    labels: tuple[str, ...] | None = None

    def includes(self, label: str) -> bool:
        return self.labels is None or label.split("@")[0] in self.labels


COMPARISONS = (
    Comparison("compare", "", None, 16),
    # Where the base model is rarely cut off: base, GRPO, ES at equal wall time and the format control.
    Comparison(
        f"compare-{LONG_TOKENS}-tokens",
        f"-{LONG_TOKENS}-tokens",
        LONG_TOKENS,
        LONG_SAMPLES,
        ("base", "grpo", "es:wall", "format:wall"),
    ),
)


def compare_command(task: str, comparison: Comparison, entries: list[str], out: Path) -> list[str]:
    """`seedcast compare` arguments (without claims) of a comparison: the same problems and samples for every
    entry, whether it is evaluated at once (`--evaluate-only`, where its weights are) or compared later."""
    n, tokens = comparison.n, comparison.tokens or TASKS[task]["max_tokens"]
    ks = [k for k in (1, 2, 4, 8, 16) if k <= n]
    return [
        *("compare", *entries, "--out", str(out), "--task", task, "--seed", str(EVAL_SEED), "--limit", "128"),
        *("--n", str(n), "--k", ",".join(map(str, ks)), "--max-tokens", str(tokens), "--local", "1"),
        *("--exclude-training-seeds", ",".join(map(str, SEEDS))),
        *[f"--set={override}" for override in TASKS[task]["eval_overrides"]],
    ]


def seedcast(command: list[str]) -> None:
    print(shlex.join(["seedcast", *command]), flush=True)
    subprocess.run([sys.executable, "-m", "seedcast.optimizer.cli", *command], check=True)


class Plan:
    """The runs of one task under OUT/TASK; `run` skips finished ones and prints every command."""

    def __init__(self, task: str, out: Path, dry_run: bool, stop_by: float | None = None) -> None:
        self.task, self.folder, self.dry_run, self.stop_by = task, out / task, dry_run, stop_by
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
                raise OutOfTime(f"{name} would take about {estimate / 60:.0f} min with its evaluations")
            require_same_machine(name, timed_against)
            shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted or outdated run starts again
            subprocess.run([sys.executable, "-m", "seedcast.optimizer.cli", *full[1:]], check=True)
            recorded.write_text(json.dumps(full) + "\n")
            print(f"# finished; its files are in {publish_run(run_dir, self.task, name)}", flush=True)
        return run_dir

    def evaluate(self, label: str, run_dir: Path, rebuildable: bool = False) -> None:
        """Evaluate a run for every comparison it belongs to while its weights exist, and publish those
        evaluations: the final comparisons then reuse them, in this session or a later one. A `rebuildable` run
        (ES: its update log rebuilds its weights) whose evaluations would not end by --stop-by leaves them to a
        later invocation, which makes them when it passes the run again; a GRPO run's cannot wait."""
        if self.dry_run:
            return
        if rebuildable and self.stop_by is not None and time.time() + evaluation_seconds() > self.stop_by:
            print(f"# {label}: evaluations left for a later invocation (its update log rebuilds it)", flush=True)
            return
        for comparison in COMPARISONS:
            if comparison.includes(label):
                out = self.folder / comparison.folder
                seedcast([*compare_command(self.task, comparison, [f"{label}={run_dir}"], out), "--evaluate-only"])
                publish_evals(out, self.task, [label])


def grid_settings(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination of the grid's values."""
    settings: list[dict[str, str]] = [{}]
    for key, values in grid.items():
        settings = [{**s, key: value} for s in settings for value in values]
    return settings


def final_eval(run_dir: Path) -> float:
    """The last greedy eval reward a run logged."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r["eval_reward"] for r in rows if "eval_reward" in r][-1]


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


def grid_leader(grid: dict[str, Path]) -> str | None:
    """The setting of the finished grid run with the best final greedy eval reward (None before any finishes)."""
    finished = [setting for setting, run_dir in grid.items() if (run_dir / "summary.json").is_file()]
    return max(finished, key=lambda setting: final_eval(grid[setting]), default=None)


def evaluate_grid_leader(plan: Plan, grid: dict[str, Path]) -> None:
    """Evaluate the best finished grid run as grpo@0: it is GRPO's seed 0 unless a grid run still to come beats
    it, whose evaluations then replace its own under that label (compare's cache knows the runs apart)."""
    leader = grid_leader(grid)
    if leader is not None:
        plan.evaluate("grpo@0", grid[leader])


def compare(plan: Plan, comparison: Comparison, entries: dict[str, Path | str], claims: str) -> None:
    """`seedcast compare` of the comparison's entries on the task's held-out problems, writing its claims."""
    labelled = [f"{label}={path}" for label, path in entries.items() if comparison.includes(label)]
    out = plan.folder / comparison.folder
    claims_task = plan.task + comparison.claims_suffix
    seedcast([*compare_command(plan.task, comparison, labelled, out), "--claims", claims, "--claims-task", claims_task])
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
        help="start no run that would not end by then (estimated from finished runs; a GRPO run with its "
        "evaluations, which need its weights, an ES run without: they may wait for a later invocation, its "
        "update log rebuilds it): a run cut short starts again, and a GRPO run's weights do not outlive the session",
    )
    args = parser.parse_args()
    plan = Plan(args.task, Path(args.out), args.dry_run, args.stop_by)
    try:
        run_plan(plan, args)
    except OutOfTime as stopped:
        print(f"# stopping before --stop-by: {stopped}; run the same command again to go on", flush=True)
    except subprocess.CalledProcessError as failed:
        # Its own error is above. A GRPO run whose weights are gone before its evaluations were made can only be
        # made again: remove its folder under OUT and docs/results, and run the bench again.
        command = shlex.join(["seedcast", *failed.cmd[3:]])
        raise SystemExit(f"# stopped: `{command}` failed (exit {failed.returncode})") from None


def run_plan(plan: Plan, args: argparse.Namespace) -> None:
    """Every stage up to --until, each run skipped when done."""
    for name in restore(plan.folder, args.task):
        print(f"# restored {name} from {PUBLISHED_ROOT / args.task}", flush=True)
    stages = STAGES[: STAGES.index(args.until) + 1]

    settings = grid_settings(TASKS[args.task]["grid"])
    grid: dict[str, Path] = {}
    try:
        for setting in settings:
            grid[json.dumps(setting)] = grpo(plan, "grid/" + "-".join(setting.values()), setting, 0)
    except OutOfTime:
        evaluate_grid_leader(plan, grid)  # the grid spans sessions: evaluate its best run while its weights exist
        raise
    evaluate_grid_leader(plan, grid)
    if not all((d / "summary.json").is_file() for d in grid.values()):
        print("# later stages depend on the grid's results", flush=True)
        return
    leader = grid_leader(grid)
    best = json.loads(leader)
    print(f"# GRPO setting: {best}", flush=True)
    grpo_runs = {0: grid[leader]}
    if "grpo" in stages:
        for seed in SEEDS[1:]:
            grpo_runs[seed] = grpo(plan, f"grpo@{seed}", best, seed, timed_against=[grpo_runs[0]])
            plan.evaluate(f"grpo@{seed}", grpo_runs[seed])
    if "probe" not in stages:
        return
    walls = [summary(d).get("wall_seconds", 0.0) for d in grpo_runs.values()]
    grpo_wall = sum(walls) / len(walls)
    timed = list(grpo_runs.values())
    grpo_steps = TASKS[args.task]["grpo_steps"]
    completions = grpo_steps * 32 * 8  # batch_size x group_size completions per GRPO step
    # population x batch_size completions per iteration
    probe = es(plan, PROBE, completions // (16 * 32), 0, timed_against=timed)
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
    plan.evaluate("hybrid@0", hybrid)
    if "format" not in stages:
        return
    reward = (f"task.evaluator={TASKS[args.task]['format_evaluator']}",)
    control = es(plan, "format:wall@0", wall_iterations, 0, reward, timed_against=timed)
    plan.evaluate("format:wall@0", control, rebuildable=True)
    if "compare" not in stages or plan.dry_run:
        return
    entries: dict[str, Path | str] = {"base": "smollm2-135m-instruct"}
    entries.update({f"grpo@{s}": d for s, d in grpo_runs.items()})
    entries[PROBE] = probe
    entries.update({f"es:wall@{s}": d for s, d in es_runs.items()})
    entries.update({"hybrid@0": hybrid, "format:wall@0": control})
    for comparison in COMPARISONS:
        compare(plan, comparison, entries, args.claims)


if __name__ == "__main__":
    main()
