"""The pass@k curves of a comparison's groups with their 95% bands, and where ES crosses GRPO (PNG).

One line per group (a problem's pass@k averaged over the group's seeds, then over problems) for every k from 1 to
the largest measured, a percentile-bootstrap band over problems around it, on a log-2 k axis; a dotted vertical
line marks each ES group's crossover (claims.crossover), where it first lies above GRPO with its interval.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from seedcast.studies.claims import Group
from seedcast.studies.pass_at_k import bootstrap_interval


def plot_group_curves(groups: dict[str, Group], k_max: int, path: Path, crossovers: dict[str, int | None]) -> Path:
    """Draw every group's pass@k curve for k = 1..k_max with its band into `path`, a line at each ES group's
    crossover k (`crossovers`, by group name, as the claims found it); returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = list(range(1, k_max + 1))
    figure, axis = plt.subplots(figsize=(7, 4.5), dpi=120)
    for name, group in groups.items():
        curves = [group.pass_at(k) for k in ks]
        bands = [bootstrap_interval(values) for values in curves]
        means = [statistics.fmean(values) for values in curves]
        color = axis.plot(ks, means, label=f"{name} ({len(group.labels)})")[0].get_color()
        axis.fill_between(ks, [low for low, _ in bands], [high for _, high in bands], alpha=0.15, color=color)
        found = crossovers.get(name)
        if found is not None:
            axis.axvline(found, linestyle=":", color=color, label=f"{name} above grpo from k = {found}")
    axis.set_xscale("log", base=2)
    axis.set_xlabel("k (samples per problem)")
    axis.set_ylabel("pass@k (held-out problems)")
    axis.set_title("pass@k by method, 95% bootstrap bands over problems")
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right", fontsize=7)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
