"""ES against GRPO on one task, every run the comparison needs, resumable: one command per task.

    python bench/es_vs_grpo.py --task synthetic --out runs/es-vs-grpo            # everything not yet done
    python bench/es_vs_grpo.py --task countdown --out runs/es-vs-grpo --until grid
    python bench/es_vs_grpo.py --task synthetic --out runs/es-vs-grpo --dry-run  # print the plan

Runs, in order (a run finished with the same command is kept; an interrupted one, or one made with other
settings, e.g. another wall-time budget, is made again):

1. `grid`: GRPO (TRL) at each learning rate × rollout temperature of the task's grid, seed 0, 10 steps;
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
   from, nor any run's in-training eval, which picked GRPO's setting), n = 16 at T = 1 at the training
   token budget, writing the task's part of docs/results/claims.json; then again at 64 new tokens (n = 4,
   base, GRPO, ES at equal wall time and the control), where the base is rarely cut off, as `TASK-64-tokens`.
   Countdown's level 1 has only 251 distinct problems, all in every training stream, so its held-out problems
   are level 2 (three numbers; `--set task.countdown_difficulty=2`), and level 1 is compared apart, without
   claims, as the training set (`compare-training-set`).

Every run is a `seedcast` command the plan prints, so any one can be repeated by hand. Each finished run's
files except weights are copied to docs/results/es-vs-grpo/TASK/NAME (`--publish-finished` copies those of
runs made before), to be committed as soon as it ends; each comparison's report, plots and per-entry
evaluations (results.json, samples.jsonl: enough for `seedcast compare` to judge the claims again) go to
docs/results/es-vs-grpo/TASK/compare[-64-tokens|-training-set].
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

# GRPO's grid per task. Synthetic's full grid picked its highest learning rate at T = 1.0 (final greedy eval
# 0.823 against 0.667-0.760 for the other three), so Countdown's, cut to two runs to fit the CPU budget, keeps
# T = 1.0 and moves the learning rate up around that winner.
SYNTHETIC_GRID = {"grpo.learning_rate": ["1e-5", "3e-5"], "grpo.temperature": ["0.7", "1.0"]}
COUNTDOWN_GRID = {"grpo.learning_rate": ["3e-5", "1e-4"], "grpo.temperature": ["1.0"]}
TASKS = {
    "synthetic": {"overrides": [], "max_tokens": 16, "format_evaluator": "format-final-number", "grid": SYNTHETIC_GRID},
    "countdown": {
        "overrides": ["task.dataset=countdown", "task.countdown_difficulty=1", "sampling.max_new_tokens=32"],
        "max_tokens": 32,
        "format_evaluator": "format-countdown",
        "grid": COUNTDOWN_GRID,
        # Level 1 has only 251 distinct problems and every training seed's stream holds all of them, so nothing
        # at level 1 is held out: the comparisons run on level 2 (three numbers), which no level-1 run can have
        # drawn, and level 1 is reported apart as the training set.
        "held_out": ["task.countdown_difficulty=2"],
        "training_set_report": True,
    },
}
GRPO_CONFIG = "configs/synthetic-cpu.yaml"
ES_CONFIG = "configs/es-best.yaml"
GRPO_STEPS = 10
SEEDS = (0, 1, 2)
# The held-out stream. Training problems come from the run seeds 0-2 (and are excluded in code); the
# in-training eval sets from seeds 1_000_003-1_000_005 (seed 0's picked GRPO's setting), so not those either.
EVAL_SEED = 2_000_003
LONG_TOKENS, LONG_SAMPLES = 64, 4  # the second evaluation, where the base model is rarely cut off
STAGES = ("grid", "grpo", "probe", "es", "hybrid", "format", "compare")


# What a finished run leaves in docs/results/es-vs-grpo/TASK/NAME: everything but weights. An ES run's
# config and update log rebuild its weights bit for bit (`seedcast export`); a GRPO run keeps its numbers.
PUBLISHED_FILES = (
    "plan-command.json",
    "config.yaml",
    "summary.json",
    "metrics.jsonl",
    "updates.jsonl",
    "trl_log.jsonl",
)
PUBLISHED_ROOT = Path("docs/results/es-vs-grpo")


COMPARE_FILES = ("report.md", "compare.json", "pass_at_k.png", "reward_curves.png", "geometry.png")
EVAL_FILES = ("results.json", "samples.jsonl")  # what `seedcast compare` needs to judge the claims again


def publish_compare(out: Path, task: str) -> Path:
    """Copy a comparison's report, plots and per-entry evaluations (not its exported models) next to the runs."""
    target = PUBLISHED_ROOT / task / out.name
    for file in COMPARE_FILES:
        if (out / file).is_file():
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out / file, target / file)
    for folder in sorted((out / "evals").glob("*")):
        for file in EVAL_FILES:
            if (folder / file).is_file():
                (target / "evals" / folder.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(folder / file, target / "evals" / folder.name / file)
    return target


def publish(run_dir: Path, task: str, name: str) -> Path:
    """Copy a finished run's small files to PUBLISHED_ROOT/TASK/NAME (committed as soon as a run ends)."""
    target = PUBLISHED_ROOT / task / name
    target.mkdir(parents=True, exist_ok=True)
    for file in PUBLISHED_FILES:
        if (run_dir / file).is_file():
            shutil.copy2(run_dir / file, target / file)
    return target


class Plan:
    """The runs of one task under OUT/TASK; `run` skips finished ones and prints every command."""

    def __init__(self, task: str, out: Path, dry_run: bool) -> None:
        self.task, self.folder, self.dry_run = task, out / task, dry_run
        self.task_overrides = TASKS[task]["overrides"]

    def run(self, name: str, subcommand: str, options: list[str], overrides: list[str]) -> Path:
        """`seedcast SUBCOMMAND OPTIONS --run-dir OUT/TASK/NAME OVERRIDES` unless that very command finished
        there (RUN_DIR/plan-command.json records it: a run made with other settings is made again)."""
        run_dir = self.folder / name
        full = ["seedcast", subcommand, *options, "--run-dir", str(run_dir), "--no-progress", *overrides]
        recorded = run_dir / "plan-command.json"
        if (run_dir / "summary.json").is_file() and recorded.is_file() and json.loads(recorded.read_text()) == full:
            return run_dir
        print(shlex.join(full), flush=True)
        if not self.dry_run:
            shutil.rmtree(run_dir, ignore_errors=True)  # an interrupted or outdated run starts again
            subprocess.run([sys.executable, "-m", "seedcast.optimizer.cli", *full[1:]], check=True)
            recorded.write_text(json.dumps(full) + "\n")
            print(f"# finished; its files are in {publish(run_dir, self.task, name)}", flush=True)
        return run_dir

    @staticmethod
    def summary(run_dir: Path) -> dict:
        path = run_dir / "summary.json"
        return json.loads(path.read_text()) if path.is_file() else {}


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
    plan: Plan, name: str, setting: dict[str, str], seed: int, steps: int = GRPO_STEPS, init_from: Path | None = None
) -> Path:
    """A GRPO run at a grid setting."""
    options = ["--config", GRPO_CONFIG, *(["--init-from", str(init_from)] if init_from else [])]
    values = [f"{k}={v}" for k, v in setting.items()]
    return plan.run(name, "grpo", options, [*plan.task_overrides, f"grpo.steps={steps}", f"seed={seed}", *values])


def es(plan: Plan, name: str, iterations: int, seed: int, extra: tuple[str, ...] = ()) -> Path:
    """An ES-best run."""
    overrides = [*plan.task_overrides, f"iterations={iterations}", f"seed={seed}", *extra]
    return plan.run(name, "train", ["--config", ES_CONFIG], overrides)


def iterations_for_wall(seconds: float, probe: dict) -> int:
    """ES iterations whose whole run (servers starting, evals, iterations) lasts `seconds`, as GRPO's
    wall time counts its whole run. From the probe run: `wall_seconds` sums its iterations, and the rest of
    its elapsed time (`wall_seconds_this_session`) is the fixed cost of starting and evaluating."""
    iterating = probe.get("wall_seconds", 1.0)
    fixed = max(0.0, probe.get("wall_seconds_this_session", iterating) - iterating)
    return max(1, round((seconds - fixed) / (iterating / max(1, probe.get("steps", 1)))))


def compare(
    task: str, entries: list[str], out: Path, claims: str | None, claims_task: str, tokens: int, n: int
) -> None:
    """`seedcast compare` of the entries on the task's held-out problems, writing `claims_task` into the claims;
    with `claims` None, on the training problems themselves (no claims: they were seen in training)."""
    ks = [k for k in (1, 2, 4, 8, 16) if k <= n]
    command = [
        *("compare", *entries, "--out", str(out), "--task", task, "--seed", str(EVAL_SEED), "--limit", "128"),
        *("--n", str(n), "--k", ",".join(map(str, ks)), "--max-tokens", str(tokens), "--local", "1"),
    ]
    if claims is not None:
        command += ["--exclude-training-seeds", ",".join(map(str, SEEDS)), "--claims", claims]
        command += ["--claims-task", claims_task]
        command += [f"--set={override}" for override in TASKS[task].get("held_out", [])]
    print(shlex.join(["seedcast", *command]), flush=True)
    subprocess.run([sys.executable, "-m", "seedcast.optimizer.cli", *command], check=True)
    print(f"# compared; report and evaluations in {publish_compare(out, task)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--out", required=True, help="folder of the runs (OUT/TASK/...)")
    parser.add_argument("--until", default="compare", choices=STAGES, help="stop after this stage")
    parser.add_argument("--claims", default="docs/results/claims.json", help="claims file compare writes into")
    parser.add_argument("--dry-run", action="store_true", help="print the commands of the runs not yet done")
    parser.add_argument(
        "--publish-finished", action="store_true", help=f"copy every finished run's files to {PUBLISHED_ROOT}/ and stop"
    )
    args = parser.parse_args()
    plan = Plan(args.task, Path(args.out), args.dry_run)
    if args.publish_finished:
        for recorded in sorted(plan.folder.glob("**/plan-command.json")):
            if (recorded.parent / "summary.json").is_file():
                print(publish(recorded.parent, args.task, str(recorded.parent.relative_to(plan.folder))))
        for out in sorted(plan.folder.glob("compare*")):
            print(publish_compare(out, args.task))
        return
    stages = STAGES[: STAGES.index(args.until) + 1]

    settings = grid_settings(TASKS[args.task]["grid"])
    grid = {json.dumps(s): grpo(plan, "grid/" + "-".join(s.values()), s, 0) for s in settings}
    if not all((d / "summary.json").is_file() for d in grid.values()):
        print("# later stages depend on the grid's results", flush=True)
        return
    best = json.loads(max(grid, key=lambda s: final_eval(grid[s])))
    print(f"# GRPO setting: {best}", flush=True)
    grpo_runs = {0: grid[json.dumps(best)]}
    if "grpo" in stages:
        grpo_runs.update({seed: grpo(plan, f"grpo@{seed}", best, seed) for seed in SEEDS[1:]})
    if "probe" not in stages:
        return
    walls = [plan.summary(d).get("wall_seconds", 0.0) for d in grpo_runs.values()]
    grpo_wall = sum(walls) / len(walls)
    completions = GRPO_STEPS * 32 * 8  # batch_size x group_size completions per GRPO step
    probe = es(plan, "es:completions@0", completions // (16 * 32), 0)  # population x batch_size per iteration
    if "es" not in stages:
        return
    probe_summary = plan.summary(probe)
    wall_iterations = iterations_for_wall(grpo_wall, probe_summary)
    es_runs = {seed: es(plan, f"es:wall@{seed}", wall_iterations, seed) for seed in SEEDS}
    if "hybrid" not in stages:
        return
    first = es(plan, "hybrid-es@0", max(1, wall_iterations // 2), 0)
    hybrid = grpo(plan, "hybrid@0", best, 0, steps=GRPO_STEPS // 2, init_from=first)
    if "format" not in stages:
        return
    control = es(plan, "format:wall@0", wall_iterations, 0, (f"task.evaluator={TASKS[args.task]['format_evaluator']}",))
    if "compare" not in stages or plan.dry_run:
        return
    base = "base=smollm2-135m-instruct"
    grpo_entries = [f"grpo@{s}={d}" for s, d in grpo_runs.items()]
    wall_entries = [f"es:wall@{s}={d}" for s, d in es_runs.items()]
    everything = [base, *grpo_entries, f"es:completions@0={probe}", *wall_entries, f"hybrid@0={hybrid}"]
    max_tokens = TASKS[args.task]["max_tokens"]
    compare(
        args.task,
        [*everything, f"format:wall@0={control}"],
        plan.folder / "compare",
        args.claims,
        args.task,
        max_tokens,
        16,
    )
    if TASKS[args.task].get("training_set_report"):
        compare(args.task, everything, plan.folder / "compare-training-set", None, args.task, max_tokens, 16)
    long_entries = [base, *grpo_entries, *wall_entries, f"format:wall@0={control}"]
    compare(
        args.task,
        long_entries,
        plan.folder / f"compare-{LONG_TOKENS}-tokens",
        args.claims,
        f"{args.task}-{LONG_TOKENS}-tokens",
        LONG_TOKENS,
        LONG_SAMPLES,
    )


if __name__ == "__main__":
    main()
