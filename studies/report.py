"""The files `seedcast compare` writes: report.md, compare.json and its PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

from seedcast.optimizer.machine import describe
from seedcast.studies.compare import Entry, paired_difference
from seedcast.studies.pass_at_k_plot import plot_pass_at_k


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_reward_curves(entries: list[Entry], path: Path) -> None:
    """Per run, against the completion tokens generated so far: the greedy eval reward (left; comparable
    across methods) and the training reward (right; ES scores perturbed members, GRPO sampled rollouts)."""
    plt = _plt()
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    for entry in entries:
        evals = entry.training.get("eval_reward_curve") or []
        train = entry.training.get("train_reward_curve") or []
        if evals:
            left.plot([t for t, _ in evals], [r for _, r in evals], marker="s", label=entry.label)
        if train:
            right.plot([t for t, _ in train], [r for _, r in train], marker=".", label=entry.label)
    left.set_title("held-out eval reward (greedy, unperturbed)")
    right.set_title("training reward (ES: population mean; GRPO: rollouts)")
    for axis in (left, right):
        axis.set_xlabel("completion tokens generated during training")
        axis.set_ylabel("reward")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def plot_geometry(entries: list[Entry], path: Path) -> None:
    """Relative L2 change per module group, one bar group per run (log scale)."""
    plt = _plt()
    runs = [e for e in entries if e.geometry]
    groups = sorted({g for e in runs for g in e.geometry["groups"]})
    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    width = 0.8 / max(len(runs), 1)
    for i, entry in enumerate(runs):
        values = [entry.geometry["groups"].get(g, {}).get("relative_l2", 0.0) or 1e-12 for g in groups]
        axis.bar([x + i * width for x in range(len(groups))], values, width=width, label=entry.label)
    axis.set_xticks([x + width * (len(runs) - 1) / 2 for x in range(len(groups))], groups)
    axis.set_yscale("log")
    axis.set_ylabel("relative L2 change ||Δθ|| / ||θ₀||")
    axis.grid(alpha=0.3, axis="y")
    axis.legend(fontsize=8)
    axis.set_title("Where training moved the weights")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _interval(row: dict) -> str:
    return f"{row['mean']:.3f} [{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}]"


def inference_note(entries: list[Entry]) -> list[str]:
    """How the samples were drawn (backend, device, dtype), and a warning when entries differ: bf16 and float32
    sample differently, so a paired difference would mix that with the models' difference."""
    kinds = {e.label: e.results.get("inference") for e in entries}
    recorded = {label: f"{i['backend']} on {i['device']}, {i['dtype']}" for label, i in kinds.items() if i}
    if not recorded:
        return []
    if len(set(recorded.values())) == 1 and len(recorded) == len(entries):
        return [f"Every entry sampled with {next(iter(recorded.values()))}.", ""]
    listed = "; ".join(f"{label}: {recorded.get(label, 'unrecorded')}" for label in kinds)
    return [
        f"**Entries were sampled differently** ({listed}): their differences mix the inference with the models.",
        "",
    ]


def markdown(entries: list[Entry], differences: dict, command: str) -> str:
    """The report: pass@k, paired differences, diversity, training cost, geometry."""
    first = entries[0].results
    ks = sorted({int(k) for e in entries for k in e.results["pass_at_k"]})
    lines = [
        "# Seedcast comparison",
        "",
        f"Command: `{command}`",
        "",
        f"Task `{first['task']}` (evaluator `{first['evaluator']}`), {first['problems']} problems, "
        f"n = {first['samples_per_problem']} samples each at temperature {first['options']['temperature']}, "
        f"top-p {first['options']['top_p']}, at most {first['options']['max_tokens']} tokens.",
        "",
        *inference_note(entries),
        "## pass@k (mean [95% bootstrap interval over problems])",
        "",
        "| model | " + " | ".join(f"pass@{k}" for k in ks) + " |",
        "|---" * (len(ks) + 1) + "|",
    ]
    for entry in entries:
        rows = entry.results["pass_at_k"]
        lines.append(
            f"| {entry.label} | " + " | ".join(_interval(rows[str(k)]) if str(k) in rows else "–" for k in ks) + " |"
        )
    if differences:
        lines += [
            "",
            f"## Paired difference against `{entries[0].label}` (same problems; * = interval excludes 0)",
            "",
            "| model | " + " | ".join(f"Δpass@{k}" for k in ks) + " |",
            "|---" * (len(ks) + 1) + "|",
        ]
        for label, by_k in differences.items():
            cells = [
                f"{d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]{'*' if d['significant'] else ''}"
                if (d := by_k.get(str(k)))
                else "–"
                for k in ks
            ]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Entropy and diversity",
        "",
        "| model | mean token entropy (nats) | distinct answers / problem | mean completion tokens | truncated "
        "| right among finished |",
        "|---|---|---|---|---|---|",
    ]
    for entry in entries:
        r = entry.results
        finished = r.get("finished_accuracy")  # absent from evaluations made before it was measured
        lines.append(
            f"| {entry.label} | {_num(r.get('mean_token_entropy'))} | "
            f"{_num(r['distinct_answers_per_problem'], 2)} | {_num(r['mean_completion_tokens'], 1)} | "
            f"{r['truncation_rate']:.1%} | {'–' if finished is None else f'{finished:.1%}'} |"
        )
    runs = [e for e in entries if e.training]
    if runs:
        lines += [
            "",
            "## Training cost",
            "",
            "| run | method | steps | completion tokens | wall time (s) | timed on | peak memory (GiB) | of "
            "| final eval |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for entry in runs:
            t = entry.training
            peak = t["peak_rss_bytes"]
            final = t["eval_reward_curve"][-1][1] if t["eval_reward_curve"] else None
            lines.append(
                f"| {entry.label} | {t['method'].upper()} | {t['steps']} | {t['completion_tokens']} | "
                f"{t['wall_seconds']:.0f} | {describe(t.get('machine'))} | {_num(peak / 2**30 if peak else None, 2)} | "
                f"{t['peak_memory_of']} | {_num(final)} |"
            )
    geometric = [e for e in entries if e.geometry]
    if geometric:
        threshold = geometric[0].geometry["threshold"]
        groups = sorted({g for e in geometric for g in e.geometry["groups"]})
        lines += [
            "",
            f"## Parameter geometry versus the base (|Δθ| > {threshold:g} counts as changed)",
            "",
            "| run | relative L2 | fraction changed | " + " | ".join(f"{g}: rel. L2 (share)" for g in groups) + " |",
            "|---" * (len(groups) + 3) + "|",
        ]
        for entry in geometric:
            g = entry.geometry
            cells = [
                f"{g['groups'][name]['relative_l2']:.2e} ({g['groups'][name]['share_of_change']:.0%})"
                if name in g["groups"]
                else "–"
                for name in groups
            ]
            lines.append(
                f"| {entry.label} | {g['relative_l2']:.3e} | {g['fraction_changed']:.1%} | " + " | ".join(cells) + " |"
            )
        if len(geometric) >= 2:
            ratio = geometric[0].geometry["relative_l2"] / max(geometric[1].geometry["relative_l2"], 1e-30)
            lines += ["", f"Relative L2 of `{geometric[0].label}` ÷ `{geometric[1].label}`: {ratio:.1f}×."]
    lines += [
        "",
        "Plots: `pass_at_k.png`"
        + (", `reward_curves.png`" if runs else "")
        + (", `geometry.png`" if geometric else "")
        + ". All numbers: `compare.json`.",
        "",
    ]
    return "\n".join(lines)


def write_report(entries: list[Entry], out: Path, command: str) -> dict:
    """Write report.md, compare.json and the plots; returns the JSON document."""
    out.mkdir(parents=True, exist_ok=True)
    differences: dict[str, dict] = {}
    reference = entries[0]
    for entry in entries[1:]:
        if reference.per_problem_correct and entry.per_problem_correct:
            n = min(len(reference.per_problem_correct[0]), len(entry.per_problem_correct[0]))
            differences[entry.label] = {
                str(k): paired_difference(reference.per_problem_correct, entry.per_problem_correct, k)
                for k in sorted(int(k) for k in entry.results["pass_at_k"])
                if k <= n
            }
    plot_pass_at_k([(e.label, e.results) for e in entries], out / "pass_at_k.png")
    if any(e.training for e in entries):
        plot_reward_curves(entries, out / "reward_curves.png")
    if any(e.geometry for e in entries):
        plot_geometry(entries, out / "geometry.png")
    document = {
        "command": command,
        "paired_differences_vs": reference.label,
        "paired_differences": differences,
        "entries": [
            {
                "label": e.label,
                "path": e.path,
                "kind": e.kind,
                "results": e.results,
                "training": e.training,
                "geometry": e.geometry,
            }
            for e in entries
        ],
    }
    (out / "compare.json").write_text(json.dumps(document, indent=2) + "\n")
    (out / "report.md").write_text(markdown(entries, differences, command))
    return document
