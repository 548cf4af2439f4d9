"""The per-entry pass@k plot of an evaluation or a comparison (pass_at_k.png): pass@k against k on a log-2 axis
with 95% bootstrap bands, the seeds of one method drawn in its colour with a line style each."""

from __future__ import annotations

from pathlib import Path

LINE_STYLES = ("-", "--", ":", "-.")


def curve_styles(labels: list[str]) -> dict[str, tuple[str, str]]:
    """A (colour, line style) per label: one colour per method (the label before `@`), a line style per seed, so a
    dozen entries never share a colour across methods as the default colour cycle's ten would."""
    from matplotlib import colormaps

    methods = list(dict.fromkeys(label.split("@")[0] for label in labels))
    palette = colormaps["tab10" if len(methods) <= 10 else "tab20"].colors
    seen: dict[str, int] = {}
    styles = {}
    for label in labels:
        method = label.split("@")[0]
        styles[label] = (palette[methods.index(method) % len(palette)], LINE_STYLES[seen.get(method, 0) % 4])
        seen[method] = seen.get(method, 0) + 1
    return styles


def plot_pass_at_k(curves: list[tuple[str, dict]], path: Path) -> None:
    """pass@k against k (log2 axis) for each (label, results), with 95% bootstrap bands; the seeds of a method share
    its colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5), dpi=120)
    all_ks: set[int] = set()
    styles = curve_styles([label for label, _ in curves])
    for label, results in curves:
        rows = results["pass_at_k"]
        ks = sorted(int(k) for k in rows)
        all_ks.update(ks)
        color, style = styles[label]
        means = [rows[str(k)]["mean"] for k in ks]
        axis.plot(ks, means, marker="o", markersize=3, color=color, linestyle=style, label=label)
        lows, highs = [rows[str(k)]["ci95"][0] for k in ks], [rows[str(k)]["ci95"][1] for k in ks]
        axis.fill_between(ks, lows, highs, alpha=0.1, color=color)
    axis.set_xscale("log", base=2)
    axis.set_xticks(sorted(all_ks), [str(k) for k in sorted(all_ks)])
    axis.set_xlabel("k")
    axis.set_ylabel("pass@k")
    axis.set_ylim(0, 1)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    first = curves[0][1]
    axis.set_title(f"pass@k on {first['problems']} problems, n={first['samples_per_problem']} (bands: 95% bootstrap)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
