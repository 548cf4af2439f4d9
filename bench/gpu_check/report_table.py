"""The GPU check's report: report.json (everything measured) and report.md (the table people read)."""

from __future__ import annotations

import json
from pathlib import Path

GIB = 2**30


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}×"


def _millions(count: int) -> str:
    return f"{count / 1e6:.0f} M" if count >= 10**7 else f"{count / 1e6:.2f} M"


def _gib(value: int | None) -> str:
    return "–" if value is None else f"{value / GIB:.2f} GiB"


def _tests_line(tests: dict | None) -> str:
    if tests is None:
        return "- gpu-marked tests: not run"
    passed = tests.get("tests", 0) - tests.get("failures", 0) - tests.get("errors", 0)
    line = f"- gpu-marked tests: {passed} of {tests.get('tests', 0)} passed, {tests.get('skipped', 0)} skipped"
    if tests.get("failed"):
        line += f"; failed: {', '.join(tests['failed'])}"
    return line + (f"; error: {tests['error']}" if tests.get("error") else "")


def _fleet_line(fleet: dict | None) -> str:
    if fleet is None:
        return "- two-server run: not run"
    line = (
        f"- two-server run: servers {fleet.get('servers_active')}, members {fleet.get('members_ok')}, "
        f"export matches the servers: {fleet.get('export_matches_servers')}, "
        f"devices the servers were told: {fleet.get('server_devices')}"
    )
    return line + (f"; error: {fleet['error']}" if fleet.get("error") else "")


def table(report: dict) -> str:
    """Markdown: what ran, the tests, the per-shape rows and the fleet run."""
    machine = report["machine"]
    lines = [
        f"# Seedcast GPU check: {report['mode']}",
        "",
        f"{machine.get('gpu') or 'CPU'}, torch {machine['torch']} (CUDA {machine['cuda']}), "
        f"transformers {machine['transformers']}, Python {machine['python']}, commit {machine.get('commit')}; "
        f"{report['seconds']:.0f} s in all. Overall: **{'passed' if report['ok'] else 'FAILED'}**.",
        "",
        _tests_line(report.get("tests")),
        _fleet_line(report.get("fleet_run")),
        "",
        "| model | parameters | noise | perturb | restore | update (8 seeds) | member ÷ plain | tokens/s "
        "| peak memory | ÷ plain inference | 4 prompt shards ÷ whole batch |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, result in report["shapes"].items():
        if "noise" not in result:
            lines.append(f"| {shape} | failed: {result.get('error')} ||||||||||")
            continue
        for noise, row in result["noise"].items():
            lines.append(
                f"| {shape} | {_millions(row['parameters'])} | {noise} | {_seconds(row['perturb'])} | "
                f"{_seconds(row['restore'])} | {_seconds(row['update'])} | {_ratio(row['member_over_plain'])} | "
                f"{row['tokens_per_second']:.0f} | {_gib(row['peak_bytes'])} | "
                f"{_ratio(row.get('peak_memory_over_plain'))} | {_ratio(row.get('shards_over_whole'))} |"
            )
        plain = result["plain"]
        lines.append(
            f"| {shape} | | plain inference | | | | 1 | {plain['tokens_per_second']:.0f} | "
            f"{_gib(plain['peak_bytes'])} | 1 | |"
        )
    lines += _population_lines(report.get("population") or {})
    return "\n".join(lines) + "\n"


def _population_lines(population: dict) -> list[str]:
    """One ES iteration per shape: full rank one member at a time, low-rank groups, and the plain-batch limit."""
    if not population:
        return []
    lines = [
        "",
        "| model | mode | G | iteration | tokens/s | ÷ full rank one at a time | ÷ the limit at its G | peak memory "
        "| ÷ full rank's peak |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    names = {"full": "full rank, one at a time", "batched": "low rank 1, batched", "plain": "plain batched (limit)"}
    for shape, result in population.items():
        if "rows" not in result:
            lines.append(f"| {shape} | failed: {result.get('error')} ||||||||")
            continue
        for row in result["rows"]:
            lines.append(
                f"| {shape} | {names[row['mode']]} | {row['group']} | {_seconds(row['seconds'])} | "
                f"{row['tokens_per_second']:.0f} | {_ratio(row['over_full'])} | {_ratio(row.get('over_limit'))} | "
                f"{_gib(row['peak_bytes'])} | {_ratio(row.get('peak_over_full'))} |"
            )
    return lines


def write_report(report: dict, out: Path) -> str:
    """Write report.json and report.md into `out`; returns the markdown."""
    text = table(report)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "report.md").write_text(text)
    return text
