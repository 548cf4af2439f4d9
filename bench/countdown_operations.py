"""Which operations did each model learn on two-number Countdown? Reads `seedcast compare` evaluations, prints a table.

A Countdown score alone cannot tell a model that learned arithmetic from one that learned a single move: at level 8
about 38% of targets are the sum of the two numbers, so a model that always adds scores about 0.38 without ever
subtracting or multiplying. This splits each model's correct samples by the operation the problem needs (the
target is the sum, difference, product or quotient of its two numbers) and counts the operators its answers use
(the expression the evaluator scores), so such a collapse shows. Two-number problems only (levels 1 and 8).

    python bench/countdown_operations.py base=runs/es-vs-grpo/countdown/compare/evals/base \\
        grpo@0=runs/es-vs-grpo/countdown/compare/evals/grpo@0
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

from seedcast.evaluators.countdown import answer_expression, parse_reference

OPERATIONS = ("+", "-", "*", "/")
NONE = "none"  # an answer with no expression the evaluator scores


def needed_operations(reference: str) -> tuple[str, ...]:
    """The operations that make the target from a two-number problem's numbers, in either order (`"41,39=80"` ->
    `("+",)`); a ValueError for any other problem."""
    parsed = parse_reference(reference)
    if parsed is None or len(parsed[0]) != 2:
        raise ValueError(f"not a two-number Countdown reference: {reference!r}")
    (a, b), target = parsed
    results = {
        "+": [a + b],
        "-": [a - b, b - a],
        "*": [a * b],
        "/": [Fraction(a, b) if b else None, Fraction(b, a) if a else None],
    }
    return tuple(operation for operation in OPERATIONS if target in results[operation])


def answer_operators(completion: str) -> frozenset[str]:
    """The operators in the expression the evaluator scores (`×`, `÷` as `*`, `/`); {NONE} when there is none."""
    answer = answer_expression(completion)
    if answer is None:
        return frozenset({NONE})
    text = answer[0].replace("×", "*").replace("÷", "/")
    return frozenset(operation for operation in OPERATIONS if operation in text)


def operations_table(rows: list[dict]) -> dict:
    """For one evaluation's `samples.jsonl` rows: per needed operation, the problems and the share of samples right;
    per operator, the share of answers that use it."""
    right, samples, problems = Counter(), Counter(), Counter()
    used, answers = Counter(), 0
    for row in rows:
        kind = "".join(needed_operations(row["reference"])) or "unreachable"
        problems[kind] += 1
        samples[kind] += len(row["rewards"])
        right[kind] += sum(reward > 0.5 for reward in row["rewards"])
        for completion in row["completions"]:
            used.update(answer_operators(completion))
            answers += 1
    return {
        "accuracy_by_needed_operation": {
            kind: {"problems": problems[kind], "right": right[kind] / samples[kind]} for kind in sorted(problems)
        },
        "answers_using": {operator: used[operator] / answers for operator in (*OPERATIONS, NONE)},
    }


def markdown(tables: dict[str, dict]) -> str:
    """One row per model: accuracy by the operation the target needs, then the operators its answers use. The
    tables are of one comparison's evaluations (the same problems): the header's problem counts are the first's."""
    order = {operation: index for index, operation in enumerate(OPERATIONS)}
    found = {kind for table in tables.values() for kind in table["accuracy_by_needed_operation"]}
    kinds = sorted(found, key=lambda kind: (len(kind) > 1, [order.get(c, len(order)) for c in kind]))  # single first
    counts = next(iter(tables.values()))["accuracy_by_needed_operation"]
    header = [f"right when target needs {kind} ({counts.get(kind, {}).get('problems', 0)})" for kind in kinds]
    header += [f"answers using {operator}" for operator in (*OPERATIONS, NONE)]
    lines = ["| model | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
    for label, table in tables.items():
        accuracy = table["accuracy_by_needed_operation"]
        cells = [f"{accuracy[kind]['right']:.2f}" if kind in accuracy else "–" for kind in kinds]
        cells += [f"{table['answers_using'][operator]:.0%}" for operator in (*OPERATIONS, NONE)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("evals", nargs="+", metavar="LABEL=FOLDER", help="evaluation folders holding samples.jsonl")
    parser.add_argument("--json", type=Path, help="also write every number here")
    args = parser.parse_args()
    tables = {}
    for entry in args.evals:
        label, _, folder = entry.rpartition("=")
        samples = Path(folder) / "samples.jsonl"
        if not samples.is_file():
            sys.exit(f"{samples} does not exist: give an evaluation folder of `seedcast compare` or `seedcast eval`")
        rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
        tables[label or Path(folder).name] = operations_table(rows)
    print(markdown(tables))
    if args.json:
        args.json.write_text(json.dumps(tables, indent=2) + "\n")


if __name__ == "__main__":
    main()
