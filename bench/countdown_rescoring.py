"""Re-score committed Countdown samples under the lenient (`countdown`) and the strict (`countdown-strict`) reward.

The lenient reward, which scored every committed Countdown run, checks the answer's expression only; the strict
one also requires every result the reply states to equal the target (`41 + 39 = 969` is right for the lenient
reward, wrong for the strict one). This reads each entry's `samples.jsonl` under a comparison's `evals/` folder,
checks that the lenient reward reproduces the logged rewards, and prints per entry: the mean reward under both,
and how often a reply states a wrong result for a right expression (reward hacking the lenient reward pays for).

    python bench/countdown_rescoring.py docs/results/es-vs-grpo/countdown/compare-greedy --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def rescore(samples_path: Path) -> dict:
    """One entry's counts: samples, lenient and strict means, wrong-result rate, mismatches with the logged rewards."""
    from seedcast.evaluators.countdown import countdown_reward, countdown_strict_reward, stated_wrong_result

    samples = lenient = strict = wrong = mismatched = 0
    for line in samples_path.read_text().splitlines():
        record = json.loads(line)
        for completion, logged in zip(record["completions"], record["rewards"], strict=True):
            reference = record["reference"]
            score = countdown_reward(completion, reference)
            samples += 1
            lenient += score
            strict += countdown_strict_reward(completion, reference)
            wrong += stated_wrong_result(completion, reference)
            mismatched += score != logged
    return {
        "samples": samples,
        "lenient": lenient / samples,
        "strict": strict / samples,
        "wrong_result": wrong / samples,
        "wrong_result_of_lenient_right": wrong / lenient if lenient else 0.0,
        "logged_rewards_reproduced": mismatched == 0,
    }


def table(results: dict[str, dict]) -> str:
    """Markdown: one row per entry."""
    lines = [
        "| entry | samples | lenient reward | strict reward | states a wrong result | of the lenient-right |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in results.items():
        lines.append(
            f"| {name} | {row['samples']} | {row['lenient']:.3f} | {row['strict']:.3f} | {row['wrong_result']:.3f} "
            f"| {row['wrong_result_of_lenient_right']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("comparison", nargs="+", help="comparison folders, each with evals/ENTRY/samples.jsonl")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT))
    report = {}
    for folder in map(Path, args.comparison):
        entries = sorted((folder / "evals").glob("*/samples.jsonl"))
        if not entries:
            print(f"error: no evals/*/samples.jsonl under {folder}", file=sys.stderr)
            return 2
        report[str(folder)] = {path.parent.name: rescore(path) for path in entries}
        print(f"## {folder}\n\n{table(report[str(folder)])}\n")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    reproduced = all(row["logged_rewards_reproduced"] for rows in report.values() for row in rows.values())
    if not reproduced:
        print("error: the lenient reward does not reproduce some logged rewards", file=sys.stderr)
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
