"""Which Countdown level suits the bundled model? pass@k of the base model per level (prints a table, writes JSON).

For each level, `seedcast eval` samples n = 16 answers per problem at temperature 1 (≤ 32 tokens) on the
first 64 problems; the samples are then scored again with the current evaluator, so a change to the
evaluator needs no new sampling (the samples are a pure function of the seeds). The target band for ES
experiments is a base pass@16 between 0.15 and 0.6: enough successes for a signal, room to improve.

    python bench/countdown_calibration.py --out runs/countdown-calibration      # levels 1-4, about 15 minutes
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from seedcast.evaluators.countdown import LEVELS, countdown_reward
from seedcast.studies.pass_at_k import bootstrap_interval, pass_at_k

KS = (1, 2, 4, 8, 16)
BAND = (0.15, 0.6)


def sample_level(level: int, folder: Path, problems: int, max_tokens: int) -> None:
    """Run `seedcast eval` for one level unless its samples exist."""
    if (folder / "samples.jsonl").is_file():
        return
    command = [
        sys.executable,
        "-m",
        "seedcast.cli",
        "eval",
        "--model",
        "smollm2-135m-instruct",
        "--task",
        "countdown",
        "--limit",
        str(problems),
        "--n",
        "16",
        "--k",
        ",".join(map(str, KS)),
        "--temperature",
        "1.0",
        "--max-tokens",
        str(max_tokens),
        "--no-entropy",
        "--out",
        str(folder),
        f"task.countdown_difficulty={level}",
    ]
    subprocess.run(command, check=True)


def rescore(folder: Path) -> dict:
    """pass@k (with 95% bootstrap intervals) of the samples, scored with the current evaluator."""
    rows = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines() if line.strip()]
    correct = [sum(countdown_reward(c, row["reference"]) == 1.0 for c in row["completions"]) for row in rows]
    n = len(rows[0]["completions"])
    table = {}
    for k in KS:
        per_problem = [pass_at_k(n, c, k) for c in correct]
        table[k] = {"mean": statistics.fmean(per_problem), "ci95": list(bootstrap_interval(per_problem))}
    return {"problems": len(rows), "samples_per_problem": n, "pass_at_k": table}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder of the per-level eval folders")
    parser.add_argument("--levels", default="1,2,3,4", help=f"levels to measure, of {sorted(LEVELS)}")
    parser.add_argument("--problems", type=int, default=64, help="problems per level (default: 64)")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens per answer at most (default: 32)")
    parser.add_argument("--json", default=None, help="also write the table to this JSON file")
    args = parser.parse_args()
    results = {}
    print(f"{'level':<7}{'numbers':>8}{'largest':>8}" + "".join(f"{'pass@' + str(k):>9}" for k in KS) + "  in band")
    for level in (int(x) for x in args.levels.split(",")):
        folder = Path(args.out) / f"level-{level}"
        sample_level(level, folder, args.problems, args.max_tokens)
        results[level] = {"numbers": LEVELS[level][0], "largest": LEVELS[level][1], **rescore(folder)}
        rates = results[level]["pass_at_k"]
        inside = BAND[0] <= rates[16]["mean"] <= BAND[1]
        print(
            f"{level:<7}{LEVELS[level][0]:>8}{LEVELS[level][1]:>8}"
            + "".join(f"{rates[k]['mean']:>9.3f}" for k in KS)
            + f"  {'yes' if inside else 'no'}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
