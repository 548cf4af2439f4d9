"""What applying an update costs against the iteration it ends, on one server, per noise kind.

    python bench/update_share.py                       # the bundled model, both noise kinds
    python bench/update_share.py --population 30 --prompts 32 --max-new-tokens 16

Every server applies every step: master += Σ coeff·ε(seed) over the step's seeds (population / 2 with
mirrored sampling), regenerating each seed's noise. On one server an iteration is `population` members and
one update, so the update's share is update ÷ (population × member + update); on S servers each runs
population / S members, so the share grows with the fleet (the last column: 8 servers). Member and update are timed
interleaved on the same backend (medians of `--repeats`), so a busy machine slows both alike.
"""

from __future__ import annotations

import argparse
import statistics
import time

from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems
from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.model_source import BUNDLED_MODEL


def measure(model: str, noise: str, population: int, prompts: int, tokens: int, repeats: int) -> dict:
    """Median member and update seconds for one noise kind (pair cache off: every member draws its noise)."""
    backend = HFBackend(model, device="cpu", dtype="auto", noise=noise, pair_cache=False)
    texts = [f"{p.prompt}\n\n{SYNTHETIC_INSTRUCTION}" for p in synthetic_problems(prompts, 2, seed=0)]
    sampling = Sampling(temperature=0.0, max_new_tokens=tokens)
    terms = [(1000 + i, 1e-6 * (-1) ** i) for i in range(population // 2)]
    backend.generate(texts, sampling)  # warm-up
    members, updates = [], []
    for repeat in range(repeats):
        started = time.perf_counter()
        backend.perturb(10 + repeat, 5e-3)
        backend.generate(texts, sampling)
        backend.restore()
        backend.sync_weights()
        members.append(time.perf_counter() - started)
        started = time.perf_counter()
        backend.apply_update(terms)
        updates.append(time.perf_counter() - started)
    member, update = statistics.median(members), statistics.median(updates)
    return {
        "noise": noise,
        "member_seconds": member,
        "update_seconds": update,
        "update_terms": len(terms),
        "share_of_one_server_iteration": update / (population * member + update),
        "share_on_8_servers": update / (population / 8 * member + update),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=BUNDLED_MODEL)
    parser.add_argument("--population", type=int, default=16, help="members per iteration (default: 16)")
    parser.add_argument("--prompts", type=int, default=32, help="prompts per member (default: 32)")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{'noise':>9}{'member s':>10}{'update s':>10}{'terms':>7}{'share, 1 server':>17}{'8 servers':>11}")
    for noise in ("gaussian", "table"):
        row = measure(args.model, noise, args.population, args.prompts, args.max_new_tokens, args.repeats)
        print(
            f"{noise:>9}{row['member_seconds']:>10.2f}{row['update_seconds']:>10.3f}{row['update_terms']:>7}"
            f"{row['share_of_one_server_iteration']:>17.4f}{row['share_on_8_servers']:>11.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
