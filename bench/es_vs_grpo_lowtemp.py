"""The `lowtemp` stage of bench/es_vs_grpo.py (Countdown): ES-best with its members scored at T = 0.3, seed 0, at
es:wall's iterations (`lowtemp:wall@0`).

Countdown's open question: ES-best's greedy accuracy rose while its sampled pass@1 stayed near the base's, and
members scored at T = 0.5 did not move it (docs/es-vs-grpo.md). Do members scored nearer greedy, at T = 0.3? One
seed answers unless it moves sampled pass@1 (`low_temperature_members_raise_pass_at_1` in the claims); then seeds 1
and 2 are worth their hour each. Made in float32, as Countdown's other runs were (dtype=auto on the AVX2-only
machine they were made on), so a bf16 machine does not change two things at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from es_vs_grpo_tasks import TASKS

LOW_TEMPERATURE = 0.3
LABEL = "lowtemp:wall@0"


def lowtemp_options() -> tuple[str, ...]:
    """The overrides that make ES-best score its members on answers sampled at LOW_TEMPERATURE."""
    return (f"sampling.temperature={LOW_TEMPERATURE}", "model.dtype=float32")


def lowtemp_stage(plan, make_es: Callable, iterations: int) -> dict[str, Path]:
    """The run, made and evaluated through `plan` on the tasks that ask the question; label -> run folder."""
    if not TASKS[plan.task].get("lowtemp"):
        return {}
    run = make_es(LABEL, iterations, 0, lowtemp_options())
    plan.evaluate(LABEL, run, rebuildable=True)
    return {LABEL: run}
