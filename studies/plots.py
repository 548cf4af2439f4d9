"""Reward-curve plots from a run's metrics.jsonl (PNG, matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path

from seedcast.optimizer.run_dir import RunDirectory


def reward_curve_after_run(run_dir: str | Path) -> str:
    """The reward curve's path, or why there is none: a finished run never fails on its picture (matplotlib
    may be missing where servers run, e.g. on a bare GPU machine)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "not drawn, matplotlib is not installed (pip install matplotlib)"
    return str(plot_reward_curve(run_dir))


def plot_reward_curve(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Mean and min–max training reward per iteration (ES: the perturbed population; GRPO: the sampled
    groups), plus the greedy eval reward when recorded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = RunDirectory(run_dir)
    method = "ES" if run.updates_path.exists() else "GRPO"  # GRPO runs keep no update log
    rows = run.metrics()
    train = [r for r in rows if r.reward_mean is not None]
    evals = [r for r in rows if r.eval_reward is not None]
    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    if train:
        x = [r.iteration + 1 for r in train]
        what = "population" if method == "ES" else "sampled groups"
        axis.plot(x, [r.reward_mean for r in train], marker="o", label=f"{what} mean")
        axis.fill_between(
            x, [r.reward_min for r in train], [r.reward_max for r in train], alpha=0.15, label=f"{what} min–max"
        )
    if evals:
        axis.plot(
            [r.iteration + 1 for r in evals],
            [r.eval_reward for r in evals],
            marker="s",
            color="black",
            label="eval (unperturbed, greedy)",
        )
    axis.set_xlabel("iteration (0 = base model)")
    axis.set_ylabel("reward")
    axis.set_title(f"Seedcast {method} — {run.path.name}")
    axis.grid(alpha=0.3)
    axis.legend(loc="best", fontsize=8)
    figure.tight_layout()
    target = Path(out) if out else run.path / "reward_curve.png"
    figure.savefig(target)
    plt.close(figure)
    return target
