"""Speed and memory of one ES server against plain inference, per model shape and noise kind.

For each shape: plain generation of 32 prompts × 128 new tokens with the model alone (its peak device
memory is the reference), then an `hf` backend per noise kind, timing perturb, restore and a 16-member
update (8 mirrored seeds) and a member (perturb + generate + restore) against a plain generation of the
same prompts, interleaved so both sides see the same machine; medians of `repeats`. Once per shape, the
prompts generated as SHARDS slices one after another ÷ all at once: what `fleet.prompt_shards` costs in
batching on this device.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import torch

PROMPTS = 32
UPDATE_TERMS = 8
SIGMA = 1e-3
SHARDS = 4


def _prompts() -> list[str]:
    from seedcast.evaluators.synthetic import SYNTHETIC_INSTRUCTION, synthetic_problems

    return [f"{p.prompt}\n\n{SYNTHETIC_INSTRUCTION}" for p in synthetic_problems(PROMPTS, 2, seed=0)]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(device: torch.device, action: Callable[[], object]) -> float:
    _synchronize(device)
    started = time.perf_counter()
    action()
    _synchronize(device)
    return time.perf_counter() - started


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: torch.device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def plain_inference(model_dir: str, device: torch.device, max_new_tokens: int) -> dict:
    """The reference: the model in bf16 (fp32 on CPUs without bf16) generating greedily, nothing else."""
    from seedcast.inference_server.backends.devices import resolve_dtype
    from seedcast.inference_server.model_source import load_model_and_tokenizer

    _free(device)
    model, tokenizer = load_model_and_tokenizer(model_dir)
    model = model.to(device, resolve_dtype("auto", device)).eval()
    tokenizer.padding_side = "left"
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in _prompts()
    ]
    encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)

    def generate() -> None:
        with torch.no_grad():
            model.generate(
                **encoded,
                max_new_tokens=max_new_tokens,
                min_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
            )

    generate()  # warm-up (kernels, allocator)
    seconds = _timed(device, generate)
    result = {"seconds": seconds, "tokens_per_second": PROMPTS * max_new_tokens / seconds, "peak_bytes": _peak(device)}
    return result  # the model is freed when this frame goes; the next measurement's _free collects it


def es_server(
    model_dir: str, device: torch.device, noise: str, max_new_tokens: int, repeats: int, shards: bool = False
) -> dict:
    """One `hf` backend: perturb, restore, update and member times, and the member ÷ plain generation ratio."""
    from seedcast.inference_server.backends.base import Sampling
    from seedcast.inference_server.backends.hf import HFBackend

    _free(device)
    backend = HFBackend(model_dir, device=str(device), dtype="auto", noise=noise, pair_cache=False)
    prompts = _prompts()
    sampling = Sampling(temperature=0.0, max_new_tokens=max_new_tokens)
    terms = [(100 + i, 1e-4 * (-1) ** i) for i in range(UPDATE_TERMS)]

    last: list = []

    def generate() -> None:
        last[:] = backend.generate(prompts, sampling)

    def restore() -> None:
        backend.restore()
        backend.sync_weights()

    generate()  # warm-up
    backend.perturb(1, SIGMA)
    restore()
    backend.apply_update(terms)

    def generate_in_shards() -> None:
        size = PROMPTS // SHARDS
        for start in range(0, PROMPTS, size):
            backend.generate(prompts[start : start + size], sampling)

    names = ("perturb", "restore", "update", "member", "plain", "ratio", *(("shards_over_whole",) if shards else ()))
    times: dict[str, list[float]] = {k: [] for k in names}
    for repeat in range(repeats):
        plain = _timed(device, generate)
        perturb = _timed(device, lambda r=repeat: backend.perturb(10 + r, SIGMA))
        member_generate = _timed(device, generate)
        restored = _timed(device, restore)
        times["perturb"].append(perturb)
        times["restore"].append(restored)
        times["member"].append(perturb + member_generate + restored)
        times["plain"].append(plain)
        times["ratio"].append((perturb + member_generate + restored) / plain)
        times["update"].append(_timed(device, lambda: backend.apply_update(terms)))
        if shards:
            times["shards_over_whole"].append(_timed(device, generate_in_shards) / plain)
    tokens = sum(c.tokens for p in last for c in p)  # of the last timed generation
    result = {name: statistics.median(values) for name, values in times.items()}
    result["member_over_plain"] = result.pop("ratio")
    result["tokens_per_second"] = tokens / result["plain"]
    result["generated_tokens"] = tokens
    result["peak_bytes"] = _peak(device)
    result["dtype"] = str(backend.dtype).removeprefix("torch.")
    result["parameters"] = sum(t.numel() for t in backend.master.values())
    return result


def measure_shape(model_dir: str, device: torch.device, max_new_tokens: int, repeats: int) -> dict:
    """Plain inference and both noise kinds for one model; peak memory ratios against plain inference."""
    plain = plain_inference(model_dir, device, max_new_tokens)
    rows = {
        noise: es_server(model_dir, device, noise, max_new_tokens, repeats, shards=noise == "gaussian")
        for noise in ("gaussian", "table")
    }
    for row in rows.values():
        if row["peak_bytes"] and plain["peak_bytes"]:
            row["peak_memory_over_plain"] = row["peak_bytes"] / plain["peak_bytes"]
    return {"plain": plain, "noise": rows}
