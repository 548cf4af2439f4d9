"""Weights from noise: perturbations, updates and fingerprints, the same code for every backend.

Noise is generated tensor by tensor on a small thread pool (`torch.randn` releases the GIL), which
halves the wall time on two cores and keeps the peak extra memory at one tensor per thread. Updates
add their terms in a fixed order, so a live update and a replay of the log give identical bits.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

import torch

from seedcast.inference_server.noise.gaussian import GAUSSIAN
from seedcast.inference_server.noise.lowrank import noise_of_rank
from seedcast.inference_server.noise.rounding import check_rounding_dtype, rounding_seed, stochastic_round_to_bf16_
from seedcast.inference_server.noise.source import NoiseSource
from seedcast.inference_server.noise.update_rules import rule_problems


def write_perturbed(
    master: torch.Tensor,
    source: NoiseSource,
    seed: int,
    name: str,
    scale: float,
    targets: list[tuple[torch.Tensor, int]],
    round_for: torch.dtype | None = None,
) -> None:
    """For each (target, sign): target = cast(master + sign·scale·ε), from one noise draw.

    Computed per chunk as (scale·ε) + master, and master − (scale·ε) for sign −1 (negating is exact, so
    the mirrored partner gets the bits a separate perturbation would give). Tensors must be contiguous.
    With `round_for` bfloat16 the values are rounded stochastically to bf16 (rounding.py) before they are written
    (None: the cast rounds to nearest), with the same rounding bits for both signs, so the pair cache still gives
    the partner a separate perturbation's bits.
    """
    flat = master.view(-1)
    outs = sorted(((target.view(-1), sign) for target, sign in targets), key=lambda item: item[1])  # −1 first
    if round_for is not None:
        check_rounding_dtype(round_for)
    for start, end, noise in source.chunks(seed, name, flat.numel(), flat.device):
        step = noise.mul_(scale) if source.fresh else noise.mul(scale)
        piece = flat[start:end]
        for out, sign in outs:  # a +1 target last: it reuses `step` in place
            value = torch.sub(piece, step) if sign < 0 else step.add_(piece)
            if round_for == torch.bfloat16:
                stochastic_round_to_bf16_(value, rounding_seed(seed, name, start))
            out[start:end].copy_(value)


def perturbed_master(
    master: torch.Tensor,
    source: NoiseSource,
    seed: int,
    name: str,
    scale: float,
    round_for: torch.dtype | None = None,
) -> torch.Tensor:
    """A fresh float32 tensor master + scale·ε, computed as (scale·ε) + master like write_perturbed. With
    `round_for` bfloat16 its values are stochastically rounded to bf16 (the cast that follows is then exact)."""
    if round_for is not None:
        check_rounding_dtype(round_for)
    stochastic = round_for == torch.bfloat16
    if source.fresh:  # the noise tensors themselves take the result: no second full-size tensor
        flat = master.view(-1)
        pieces = []
        for start, end, noise in source.chunks(seed, name, flat.numel(), flat.device):
            value = noise.mul_(scale).add_(flat[start:end])
            pieces.append(stochastic_round_to_bf16_(value, rounding_seed(seed, name, start)) if stochastic else value)
        return (pieces[0] if len(pieces) == 1 else torch.cat(pieces)).view_as(master)
    out = torch.empty_like(master, dtype=torch.float32)
    write_perturbed(master, source, seed, name, scale, [(out, 1)], round_for)
    return out


def default_noise_threads() -> int:
    """Threads used for noise generation: all cores torch may use, at most 8."""
    return max(1, min(8, torch.get_num_threads(), os.cpu_count() or 1))


def for_each_tensor(names: Iterable[str], work: Callable[[str], None], threads: int | None = None) -> None:
    """Run `work(name)` for every name, on a thread pool; re-raises the first error."""
    names = list(names)
    threads = threads or default_noise_threads()
    if threads == 1 or len(names) == 1:
        for name in names:
            work(name)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="seedcast-noise") as pool:
        for future in [pool.submit(work, name) for name in names]:
            future.result()


def apply_update_terms(
    master: Mapping[str, torch.Tensor],
    terms: list[tuple[int, float]],
    threads: int | None = None,
    source: NoiseSource = GAUSSIAN,
    momentum: float = 0.0,
    velocity: dict[str, torch.Tensor] | None = None,
) -> None:
    """master[name] += sum(coeff * noise(seed, name)) for every tensor, in float32, terms in order.

    Each coordinate receives its terms in order whatever the loop nesting, so table noise (chunks that are
    read-only slices) goes chunk by chunk with every term inside, one pass over the tensor instead of one per
    term, with bit-identical results.

    With `momentum` β > 0 the sum goes into a float32 velocity instead, `velocity[name] = β·velocity[name] +
    sum(...)`, and master += velocity[name]; `velocity` (kept by the caller from step to step, empty at the
    base model) gains a zero tensor per name on first use. The order of the terms and of these operations is
    fixed, so a live update and a replay of the log give identical bits.
    """
    if not terms and not momentum:  # an empty plain step moves nothing: no pass over the weights
        return
    if momentum and velocity is None:
        raise ValueError("momentum needs the caller's velocity buffers (a dict kept across updates)")
    if momentum and any(name not in velocity for name in master):
        for name, tensor in master.items():  # allocated here, once, not in the worker threads
            velocity.setdefault(name, torch.zeros_like(tensor, dtype=torch.float32))

    def update_one(name: str) -> None:
        flat = master[name].view(-1)
        target = velocity[name].view(-1) if momentum else flat
        if momentum:
            target.mul_(momentum)
        if source.fresh:  # drawn noise: one buffer, refilled seed after seed
            buffer = torch.empty_like(flat, dtype=torch.float32)
            for seed, coeff in terms:
                for start, end, noise in source.chunks(seed, name, flat.numel(), flat.device, buffer):
                    target[start:end].add_(noise, alpha=coeff)
        elif terms:  # read-only slices: every term's chunk added while the target's chunk is in cache
            streams = [source.chunks(seed, name, flat.numel(), flat.device) for seed, _ in terms]
            for pieces in zip(*streams, strict=True):
                chunk = target[pieces[0][0] : pieces[0][1]]
                for (_, _, noise), (_, coeff) in zip(pieces, terms, strict=True):
                    chunk.add_(noise, alpha=coeff)
        if momentum:
            flat.add_(target)

    for_each_tensor(master.keys(), update_one, threads)


def apply_rule(
    master: Mapping[str, torch.Tensor],
    terms: list[tuple[int, float]],
    rule: str,
    params: Mapping[str, float],
    velocity: dict[str, torch.Tensor],
    source: NoiseSource,
    threads: int | None = None,
    rank: int = 0,
    frozen: frozenset[str] = frozenset(),
) -> None:
    """Apply one step by its update rule (update_rules.py) to the float32 master; `velocity` is the caller's
    rule state kept from step to step (the momentum buffers, empty until a step uses them). A step of
    perturbation rank `rank` > 0 moves each 2-D tensor by its members' low-rank noise (lowrank.py) and leaves
    the `frozen` tensors untouched, bit for bit (es.lowrank_targets)."""
    problems = rule_problems(rule, params)
    if problems:
        raise ValueError("; ".join(problems))
    momentum = params["momentum"] if rule == "momentum" else 0.0
    if rank and frozen:
        master = {name: tensor for name, tensor in master.items() if name not in frozen}
    apply_update_terms(master, terms, threads, noise_of_rank(source, rank, master), momentum, velocity)


def weights_fingerprint(named_tensors: Iterator[tuple[str, torch.Tensor]] | Mapping[str, torch.Tensor]) -> str:
    """A SHA-256 over names, shapes, dtypes and bytes of the tensors, in name order (hex, 16 chars).

    Two replicas with the same base and the same update log have the same fingerprint.
    """
    items = sorted(named_tensors.items() if isinstance(named_tensors, Mapping) else named_tensors)
    digest = hashlib.sha256()
    for name, tensor in items:
        flat = tensor.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"{name}|{tuple(tensor.shape)}|{tensor.dtype}|".encode())
        digest.update(memoryview(flat.view(torch.uint8).numpy()))
    return digest.hexdigest()[:16]
