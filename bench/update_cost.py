"""What an update step costs a server, with and without momentum (prints a table, writes JSON).

Applies the same update (`--terms` seeds, as a mirrored population of 2 × terms leaves) to the
bundled model's float32 master with both noise kinds, β = 0 (plain step) and β > 0 (the float32
velocity path of `es.momentum`), and reports the median seconds of `--repeats` applications
(interleaved, so a busy machine slows all rows alike) and the memory the velocity adds.

    python bench/update_cost.py                      # the bundled SmolLM2-135M, 8 terms, β = 0.9
    python bench/update_cost.py --terms 15 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from seedcast.inference_server.model_source import BUNDLED_MODEL, load_model_and_tokenizer
from seedcast.inference_server.noise.apply import apply_update_terms
from seedcast.inference_server.noise.kinds import NOISE_KINDS, noise_source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=BUNDLED_MODEL, help="model spec (default: the bundled SmolLM2-135M)")
    parser.add_argument("--terms", type=int, default=8, help="(seed, coefficient) terms per update (default: 8)")
    parser.add_argument("--momentum", type=float, default=0.9, help="β of the momentum rows (default: 0.9)")
    parser.add_argument("--repeats", type=int, default=5, help="applications per row; the median is reported")
    parser.add_argument("--threads", type=int, default=None, help="noise threads (default: torch's)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    model, _ = load_model_and_tokenizer(args.model)
    master = {name: p.detach().clone() for name, p in model.named_parameters()}
    parameters = sum(t.numel() for t in master.values())
    terms = [(1000 + i, 1e-6 * (-1) ** i) for i in range(args.terms)]
    cases = [(noise, beta) for noise in NOISE_KINDS for beta in (0.0, args.momentum)]
    velocities: dict[tuple[str, float], dict] = {case: {} for case in cases}
    seconds: dict[tuple[str, float], list[float]] = {case: [] for case in cases}
    for case in cases:  # warm-up: builds the table, allocates the velocity
        apply_update_terms(master, terms, args.threads, noise_source(case[0]), case[1], velocities[case])
    for _ in range(args.repeats):
        for noise, beta in cases:
            started = time.perf_counter()
            apply_update_terms(master, terms, args.threads, noise_source(noise), beta, velocities[(noise, beta)])
            seconds[(noise, beta)].append(time.perf_counter() - started)
    rows = []
    print(f"{parameters:,} parameters, {args.terms} terms per update, median of {args.repeats}")
    print(f"{'noise':<10}{'momentum':>9}{'seconds':>9}{'vs plain':>10}{'extra memory':>14}")
    for noise, beta in cases:
        median = statistics.median(seconds[(noise, beta)])
        plain = statistics.median(seconds[(noise, 0.0)])
        extra = sum(t.numel() * t.element_size() for t in velocities[(noise, beta)].values())
        rows.append(
            {
                "noise": noise,
                "momentum": beta,
                "seconds": median,
                "ratio": median / plain,
                "extra_bytes": extra,
                "terms": args.terms,
                "parameters": parameters,
            }
        )
        print(f"{noise:<10}{beta:>9.2f}{median:>9.3f}{median / plain:>10.3f}{extra / 2**30:>11.2f} GiB")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"model": args.model, "threads": torch.get_num_threads(), "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
