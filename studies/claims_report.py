"""claims.md: the claims file as tables a person reads, made from claims.json by `seedcast compare`.

The JSON stays the record (every number, interval and run); this page shows per task the rows (method,
budget, seeds, pass@k with intervals, wall time, completions, truncation, accuracy among finished answers and,
for Countdown, how often an answer states a wrong result), each claim's verdict with the paired differences
behind it, and the format control. It is rewritten whole from the JSON every time a task's part changes, so
it never disagrees with it.
"""

from __future__ import annotations

import json
from pathlib import Path

from seedcast.optimizer.atomic_file import write_atomically

HEADER = (
    "# The ES papers' claims, checked\n\n"
    "Written by `seedcast compare --claims` from [claims.json](claims.json); do not edit. Intervals are 95% "
    "percentile bootstraps over held-out problems; differences are paired over problems. A group of seeds "
    "(`es:wall`, `grpo`) counts a problem's pass@k as the mean over its seeds.\n"
)


def _interval(value: dict, signed: bool = False) -> str:
    low, high = value["ci95"]
    sign = "+" if signed else ""
    return f"{value['mean']:{sign}.3f} [{low:{sign}.3f}, {high:{sign}.3f}]"


def _optional(value: float | None, pattern: str) -> str:
    return "–" if value is None else format(value, pattern)


def _rows_table(rows: list[dict]) -> list[str]:
    ks = sorted({int(k) for row in rows for k in row["pass_at_k"]})
    shown = sorted({ks[0], ks[-1]})
    head = ["method", "budget", "seeds", *(f"pass@{k}" for k in shown), "wall s", "timed on", "completions"]
    head += ["truncated", "accuracy among finished"]
    hacking = any("stated_wrong_result_rate" in row for row in rows)
    head += ["states a wrong result"] if hacking else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["method"], row["budget"] or "–", str(row["seeds"])]
        cells += [_interval(row["pass_at_k"][str(k)]) for k in shown]
        cells += [_optional(row.get("wall_seconds"), ",.0f"), "; ".join(row.get("timed_on") or []) or "–"]
        cells += [_optional(row.get("completions"), ",.0f")]
        cells += [_optional(row.get("truncation_rate"), ".1%"), _optional(row.get("finished_accuracy"), ".3f")]
        cells += [_optional(row.get("stated_wrong_result_rate"), ".1%")] if hacking else []
        lines.append("| " + " | ".join(cells) + " |")
    machines = sorted({machine for row in rows for machine in row.get("timed_on") or []})
    if len(machines) > 1:
        lines += ["", f"Wall times here come from {len(machines)} kinds of machine: compare them only within one."]
    return lines


def _numbers(numbers: dict) -> str:
    parts = []
    for name, value in numbers.items():
        parts.append(f"{name}: {_interval(value, signed=True)}" if isinstance(value, dict) else f"{name}: {value:.1f}")
    return "; ".join(parts)


def _crossover(crossovers: dict) -> str:
    """Where each ES group's pass@k first lies above GRPO's with its interval, or that it never does."""
    parts = []
    for name, found in crossovers.items():
        if found["k"] is None:
            parts.append(f"{name}: none up to k = {found['k_max']}")
        else:
            parts.append(f"{name}: k = {found['k']} ({_interval(found['difference'], signed=True)})")
    return "crossover (ES above GRPO, interval above 0): " + "; ".join(parts)


def _claims_table(claims: list[dict]) -> list[str]:
    lines = ["| claim | verdict | measured |", "|---|---|---|"]
    for claim in claims:
        what = claim["difference"] + (f", k = {claim['k']}" if "k" in claim else "")
        measured = _numbers(claim["numbers"])
        if claim.get("crossover"):
            measured += "; " + _crossover(claim["crossover"])
        for key in (key for key in claim if key.startswith("at_pass_at_")):  # reported beside, not judged
            measured += f"; beside it, pass@{key.removeprefix('at_pass_at_')}: " + _numbers(claim[key])
        lines.append(f"| `{claim['claim']}` | **{claim['verdict']}** | {what}: {measured} |")
    return lines


def render_claims(document: dict) -> str:
    """The whole claims file as Markdown, one section per task."""
    lines = [HEADER]
    for task, part in document.get("tasks", {}).items():
        heading = f"## {task} ({part.get('problems', '?')} held-out problems)"
        lines += [heading, "", "    " + part.get("command", ""), ""]
        lines += [*_rows_table(part.get("rows", [])), ""]
        if part.get("claims"):
            lines += [*_claims_table(part["claims"]), ""]
        control = part.get("format_control")
        if control:
            lines += ["Format control (" + control["difference"] + "):", ""]
            lines += [f"- {name}: {_interval(value, signed=True)}" for name, value in control["numbers"].items()]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_claims_report(claims_path: Path) -> Path:
    """Render claims.json at `claims_path` to the .md beside it (atomically); returns its path."""
    target = claims_path.with_suffix(".md")
    write_atomically(target, render_claims(json.loads(claims_path.read_text())))
    return target


def append_claims_to_report(report: Path, task: str, part: dict, groups_plot: str) -> None:
    """Add the comparison's claims (the verdicts and the numbers behind them) and its groups' pass@k plot to its
    report.md, so the report shows the crossover a reader came for without opening claims.md."""
    lines = [f"## Claims (`{task}` in the claims file)", "", *_claims_table(part.get("claims", [])), ""]
    lines.append(f"Every method's pass@k with its 95% band, and a dotted line at any crossover: `{groups_plot}`.")
    write_atomically(report, report.read_text().rstrip() + "\n\n" + "\n".join(lines) + "\n")
