"""The GPU check's population part: one ES iteration's tokens/s with full-rank members one at a time, against
low-rank members generated together in groups of G (fleet.members_per_batch), against the limit, plain batched
generation of the same G × prompts sequences (bench/population_batching.py, whose modes this runs), with the
peak device memory of each."""

from __future__ import annotations

import argparse
import sys

import torch
from site_setup import REPO_ROOT

POPULATION, PROMPTS, GROUPS = 32, 32, (8, 32)
DRY_POPULATION, DRY_PROMPTS, DRY_GROUPS = 4, 4, (2, 4)


def measure_population(model_dir: str, device: torch.device, max_new_tokens: int, dry: bool) -> dict:
    """Rows of (mode, G, seconds, tokens/s, peak bytes) and the ratios the low-rank goals are stated in."""
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    from population_batching import run_mode

    from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
    from seedcast.inference_server.backends.hf import HFBackend

    population, count, groups = (DRY_POPULATION, DRY_PROMPTS, DRY_GROUPS) if dry else (POPULATION, PROMPTS, GROUPS)
    args = argparse.Namespace(population=population, rank=1, sigma=1e-3, temperature=1.0, max_new_tokens=max_new_tokens)
    prompts = [f"{p.prompt}\n\n{SYNTHETIC_INSTRUCTION}" for p in synthetic_problems(count, 2, seed=0)]
    backend = HFBackend(model_dir, device=str(device), dtype="auto", noise="auto", max_batch=4096)
    run_mode(backend, "batched", groups[0], args, prompts)  # warm-up
    rows = []
    for mode, group in [("full", 1), *[(m, g) for g in groups for m in ("batched", "plain")]]:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        seconds, tokens = run_mode(backend, mode, group, args, prompts)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        rows.append(
            {
                "mode": mode,
                "group": group,
                "seconds": seconds,
                "tokens_per_second": tokens / seconds,
                "peak_bytes": peak,
            }
        )
    full = rows[0]
    for row in rows:
        row["over_full"] = row["tokens_per_second"] / full["tokens_per_second"]
        limit = next((r for r in rows if r["mode"] == "plain" and r["group"] == row["group"]), None)
        if row["mode"] == "batched" and limit:
            row["over_limit"] = row["tokens_per_second"] / limit["tokens_per_second"]
        if row["peak_bytes"] and full["peak_bytes"]:
            row["peak_over_full"] = row["peak_bytes"] / full["peak_bytes"]
    return {"ok": True, "population": population, "prompts": count, "max_new_tokens": max_new_tokens, "rows": rows}
