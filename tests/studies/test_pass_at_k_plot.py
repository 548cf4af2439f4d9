"""The per-entry pass@k plot keeps a dozen entries apart: a colour per method, a line style per seed."""

from __future__ import annotations

from seedcast.studies.pass_at_k_plot import curve_styles, plot_pass_at_k


def test_seeds_share_their_methods_colour_and_methods_never_share_one():
    labels = ["base", *(f"{method}@{seed}" for method in ("grpo", "es:wall", "coverage:wall") for seed in (0, 1, 2))]
    labels += ["hybrid@0", "format:wall@0"]
    styles = curve_styles(labels)
    colour = {label.split("@")[0]: styles[label][0] for label in labels}
    assert len(set(colour.values())) == len(colour) == 6  # the default cycle gave base and a coverage seed one colour
    for method in ("grpo", "es:wall", "coverage:wall"):
        seeds = [styles[f"{method}@{seed}"] for seed in (0, 1, 2)]
        assert {c for c, _ in seeds} == {colour[method]} and len({s for _, s in seeds}) == 3


def test_more_methods_than_ten_still_get_a_colour_each(tmp_path):
    labels = [f"method{i}@0" for i in range(14)]
    assert len({colour for colour, _ in curve_styles(labels).values()}) == 14
    results = {"pass_at_k": {"1": {"mean": 0.2, "ci95": [0.1, 0.3]}, "4": {"mean": 0.5, "ci95": [0.4, 0.6]}}}
    results |= {"problems": 8, "samples_per_problem": 4}
    plot_pass_at_k([(label, results) for label in labels], tmp_path / "pass_at_k.png")
    assert (tmp_path / "pass_at_k.png").stat().st_size > 1000
