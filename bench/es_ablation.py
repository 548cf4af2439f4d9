"""The ES ablation on the offline arithmetic task: today's ES, then each option alone, then a combination,
one seed, the same budget of generated completions per row (prints a table, writes JSON).

Every row is `seedcast train --config configs/synthetic-cpu.yaml` plus the row's overrides, run one after
another (each row has the machine to itself) into OUT/ROW, so any row is repeatable with the command the
table prints. Budget: 10 iterations × 16 members × 32 completions = 5,120 completions per row (a row that
samples K answers per prompt uses 32 / K prompts). Rows that change σ keep α/σ, the size of a step, fixed;
the momentum row keeps α/(1 − β), the size of a steady-state step, fixed.

    python bench/es_ablation.py --out runs/ablation                       # every row (about an hour here)
    python bench/es_ablation.py --out runs/ablation --rows sampled,per_prompt
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

CONFIG = "configs/synthetic-cpu.yaml"
ROWS: dict[str, list[str]] = {
    "baseline": [],
    "sampled": ["sampling.temperature=1.0", "sampling.samples_per_prompt=2", "batch_size=16"],
    "per_prompt": ["es.fitness=per_prompt"],
    "momentum": ["es.momentum=0.5", "es.learning_rate=5e-6"],
    "sigma_1e-3_nearest": ["es.sigma=0.001", "es.learning_rate=2e-6"],
    "sigma_1e-3_stochastic": ["es.sigma=0.001", "es.learning_rate=2e-6", "es.rounding=stochastic"],
    "sigma_1e-3_float32": ["es.sigma=0.001", "es.learning_rate=2e-6", "model.dtype=float32"],
    "combined": [
        "sampling.temperature=1.0",
        "sampling.samples_per_prompt=2",
        "batch_size=16",
        "es.fitness=per_prompt",
        "es.momentum=0.5",
        "es.learning_rate=5e-6",
    ],
}


def run_row(name: str, out: Path) -> dict:
    """Train one row (unless OUT/ROW already finished) and read back what it measured."""
    run_dir = out / name
    command = [
        sys.executable,
        "-m",
        "seedcast.cli",
        "train",
        "--config",
        CONFIG,
        "--run-dir",
        str(run_dir),
        "--no-progress",
        *ROWS[name],
    ]
    if not (run_dir / "summary.json").is_file():
        started = time.perf_counter()
        subprocess.run(command, check=True)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval_reward"] for r in rows if "eval_reward" in r]
    summary = json.loads((run_dir / "summary.json").read_text())
    members = sum(r.get("members_ok", 0) for r in rows)  # the completions per member are fixed per row
    return {
        "row": name,
        "overrides": ROWS[name],
        "eval_base": evals[0],
        "eval_final": evals[-1],
        "eval_curve": evals,
        "wall_seconds": summary["wall_seconds"],
        "members": members,
        "fingerprint": summary["fingerprint"],
        "command": " ".join(["seedcast", *command[3:]]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder of the row run directories")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows (default: all: {','.join(ROWS)})")
    parser.add_argument("--json", default=None, help="also write the table to this JSON file")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    print(f"{'row':<24}{'eval base':>10}{'eval final':>11}{'change':>8}{'wall s':>8}")
    for name in args.rows.split(","):
        result = run_row(name, out)
        results.append(result)
        change = result["eval_final"] - result["eval_base"]
        print(
            f"{name:<24}{result['eval_base']:>10.3f}{result['eval_final']:>11.3f}{change:>+8.3f}"
            f"{result['wall_seconds']:>8.0f}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
