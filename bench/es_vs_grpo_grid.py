"""GRPO's grid (the `grid` stage of bench/es_vs_grpo.py): which finished grid run leads, and its evaluations as
grpo@0, GRPO's seed 0 from then on."""

from __future__ import annotations

from pathlib import Path

from es_vs_grpo_retrain import final_eval


def grid_leader(grid: dict[str, Path]) -> str | None:
    """The setting of the finished grid run with the best final greedy eval reward (None before any finishes)."""
    finished = [setting for setting, run_dir in grid.items() if (run_dir / "summary.json").is_file()]
    return max(finished, key=lambda setting: final_eval(grid[setting]), default=None)


def evaluate_grid_leader(plan, grid: dict[str, Path]) -> None:
    """Evaluate the best finished grid run as grpo@0: it is GRPO's seed 0 unless a grid run still to come beats
    it, whose evaluations then replace its own under that label (compare's cache knows the runs apart)."""
    leader = grid_leader(grid)
    if leader is not None:
        plan.evaluate("grpo@0", grid[leader])
