"""How faithfully does the inference dtype carry a perturbation σ·ε? (prints a table, writes JSON)

For every parameter of the model, compares the perturbation the model really sees,
cast(master + σ·ε) − cast(master), with the intended σ·ε: the fraction of noise entries that round
away entirely, the relative RMS error, and the gain Σ applied·intended / Σ intended² (1 when the
perturbation arrives in full on average; what an ES gradient estimate scales with). bf16 keeps 8 bits
of mantissa, so small σ is swallowed with nearest rounding; `es.rounding=stochastic` rounds so the
perturbation survives in expectation (a larger RMS error, a gain near 1).

    python bench/noise_fidelity.py                      # the bundled SmolLM2-135M, bf16 and fp16
    python bench/noise_fidelity.py --model DIR --sigmas 1e-3,1e-2 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from seedcast.inference_server.model_source import BUNDLED_MODEL, load_model_and_tokenizer
from seedcast.inference_server.noise.gaussian import tensor_noise
from seedcast.inference_server.noise.rounding import rounding_seed, stochastic_round_to_bf16_


def fidelity(
    master: dict[str, torch.Tensor], sigma: float, dtype: torch.dtype, stochastic: bool = False, seed: int = 1
) -> dict[str, float]:
    """Swallowed fraction, relative RMS error and gain of the applied perturbation, over all tensors."""
    swallowed = total = 0
    error_sq = intended_sq = product = 0.0
    for name, weight in master.items():
        intended = sigma * tensor_noise(seed, name, weight.shape)
        perturbed = weight + intended
        if stochastic:
            stochastic_round_to_bf16_(perturbed, rounding_seed(seed, name, 0))
        applied = perturbed.to(dtype).float() - weight.to(dtype).float()
        swallowed += int(((applied == 0) & (intended != 0)).sum())
        total += weight.numel()
        error_sq += float(((applied - intended) ** 2).sum())
        intended_sq += float((intended**2).sum())
        product += float((applied * intended).sum())
    return {
        "swallowed_fraction": swallowed / total,
        "relative_rms_error": (error_sq / intended_sq) ** 0.5,
        "gain": product / intended_sq,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=BUNDLED_MODEL, help="model spec (default: the bundled SmolLM2-135M)")
    parser.add_argument("--sigmas", default="5e-4,1e-3,2e-3,5e-3,1e-2", help="comma-separated σ values")
    parser.add_argument("--dtypes", default="bfloat16,float16", help="comma-separated inference dtypes")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    model, _ = load_model_and_tokenizer(args.model)
    master = {name: p.detach() for name, p in model.named_parameters()}
    rows = []
    print(f"{'dtype':<10}{'rounding':<12}{'sigma':>8}{'swallowed':>11}{'rel. RMS err':>14}{'gain':>7}{'seconds':>9}")
    cases = [(d, False) for d in args.dtypes.split(",")]
    if "bfloat16" in args.dtypes.split(","):
        cases.insert(1, ("bfloat16", True))
    for dtype_name, stochastic in cases:
        for sigma in (float(s) for s in args.sigmas.split(",")):
            started = time.perf_counter()
            measured = fidelity(master, sigma, getattr(torch, dtype_name), stochastic)
            rounding = "stochastic" if stochastic else "nearest"
            row = {"dtype": dtype_name, "rounding": rounding, "sigma": sigma, **measured}
            rows.append(row)
            print(
                f"{dtype_name:<10}{rounding:<12}{sigma:>8.0e}{row['swallowed_fraction']:>11.1%}"
                f"{row['relative_rms_error']:>14.1%}{row['gain']:>7.3f}{time.perf_counter() - started:>9.1f}"
            )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"model": args.model, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
