"""The `coverage` stage of bench/es_vs_grpo.py: ES whose fitness is pass@k (`es.fitness=pass_at_k`) at GRPO's wall
time, three seeds, k chosen on the in-training eval set only (issue: does an ES that optimises coverage raise
pass@k at large k?).

A coverage member samples COVERAGE_SAMPLES answers at T = 1 for each of COVERAGE_PROMPTS prompts: the 32
completions an ES-best member makes (32 prompts, greedy), so an iteration costs about what ES-best's does and the
probe's seconds per iteration set its iterations, as for es:wall. Its summary records the wall time it really took,
which the claims table shows beside GRPO's.

Choosing k: seed 0 is trained at each of COVERAGE_KS (`coverage/kK`), each run is sampled on seed 0's in-training
eval set (the problems its own eval reward was measured on, never the held-out stream), n = 16 at T = 1, and the k
with the highest pass@16 there is coverage's k (a tie goes to the smaller k). That run is `coverage:wall@0`, as
GRPO's grid leader is grpo@0, and seeds 1 and 2 are trained at its k.

Wall time is matched only on the machine it was measured on (es_vs_grpo_reference.py). Once all of coverage's runs
are made, their recorded iterations are its budget (`made_budget`): a later invocation on another kind of machine
reuses them and times nothing there (timing GRPO again there would train GRPO, then every coverage run at that
machine's count).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from es_vs_grpo_files import publish_evals
from es_vs_grpo_reference import made_budget, wall_reference
from es_vs_grpo_tasks import SEEDS, Comparison, compare_command
from es_vs_grpo_time import iterations_for_wall

from seedcast.optimizer.eval_set import EVAL_SEED_OFFSET

COVERAGE_SAMPLES, COVERAGE_PROMPTS = 8, 4  # 32 completions a member, as ES-best's 32 greedy prompts
COVERAGE_KS = (2, 8)  # the candidates for es.fitness_k, each estimated from the member's 8 samples of a prompt
SELECTION_K = 16
# Seed 0's in-training eval set: the first eval_size (96, configs/es-best.yaml) problems of its eval stream.
SELECTION = Comparison(
    "coverage-selection", None, None, SELECTION_K, ("coverage:wall",), seed=EVAL_SEED_OFFSET, limit=96, held_out=False
)


def coverage_options(k: int) -> tuple[str, ...]:
    """The overrides that make ES-best optimise pass@k: k's estimate from COVERAGE_SAMPLES answers at T = 1."""
    return (
        "es.fitness=pass_at_k",
        f"es.fitness_k={k}",
        f"sampling.samples_per_prompt={COVERAGE_SAMPLES}",
        "sampling.temperature=1.0",
        f"batch_size={COVERAGE_PROMPTS}",
    )


def chosen_k(out: Path, labels: dict[int, str]) -> tuple[int, dict[int, float]]:
    """The candidate k whose seed-0 run has the highest pass@16 on the in-training eval set (ties: the smaller k),
    with every candidate's pass@16."""
    scores = {}
    for k, label in labels.items():
        results = json.loads((out / "evals" / label / "results.json").read_text())
        scores[k] = results["pass_at_k"][str(SELECTION_K)]["mean"]
    return max(sorted(scores), key=lambda k: scores[k]), scores


def run_names() -> list[str]:
    """Every run the stage makes: the candidates at seed 0, then seeds 1 and 2."""
    return [f"coverage/k{k}" for k in COVERAGE_KS] + [f"coverage:wall@{seed}" for seed in SEEDS[1:]]


def coverage_stage(
    plan, make_es: Callable, sample: Callable[[list[str], Comparison], bool], grpo_runs: list[Path], probe: Path
) -> dict[str, Path]:
    """Coverage ES's runs, made and evaluated through `plan` (`make_es` is the bench's `es`, `sample` its
    `seedcast`, which runs a comparison's command): each candidate k at seed 0, the choice of k, then seeds 1 and
    2. Returns label -> run folder for the comparisons (empty while the candidates are still to come, as in a dry
    run)."""
    made = made_budget(plan.folder, run_names())
    if made:  # timed against themselves, so none is made again on another kind of machine
        iterations, timed = made
    else:
        timed, grpo_wall, pace = wall_reference(plan, make_es, grpo_runs, probe)
        if not pace:
            print("# coverage: its wall budget waits on GRPO and the probe timed on this machine", flush=True)
            return {}
        iterations = iterations_for_wall(grpo_wall, pace)
    candidates = {k: make_es(f"coverage/k{k}", iterations, 0, coverage_options(k), timed) for k in COVERAGE_KS}
    if plan.dry_run:
        print("# coverage: its k is chosen once the candidates are sampled on the in-training eval set", flush=True)
        return {}
    out, labels = plan.folder / SELECTION.folder, {k: f"coverage:wall@k{k}" for k in COVERAGE_KS}
    for k, run in candidates.items():
        sample([*compare_command(plan.task, SELECTION, [f"{labels[k]}={run}"], out), "--evaluate-only"], SELECTION)
    publish_evals(out, plan.task, list(labels.values()))
    k, scores = chosen_k(out, labels)
    shown = ", ".join(f"k = {c}: {score:.3f}" for c, score in scores.items())
    print(f"# coverage's k: {k} (pass@{SELECTION_K} on seed 0's in-training eval set: {shown})", flush=True)
    runs = {"coverage:wall@0": candidates[k]}
    for seed in SEEDS[1:]:
        runs[f"coverage:wall@{seed}"] = make_es(f"coverage:wall@{seed}", iterations, seed, coverage_options(k), timed)
    for label, run in runs.items():
        plan.evaluate(label, run, rebuildable=True)
    return runs
