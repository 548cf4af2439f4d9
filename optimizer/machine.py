"""Which machine a run was timed on: recorded in summary.json, because wall time means nothing without it.

A wall-time budget matched on one machine does not carry to another: on a 2-core CPU with avx512_bf16 a
member of the bundled model takes about 3 s, on a 2-core AVX2-only CPU (fp32 inference) about 12 s. Runs
compared at equal wall time must therefore come from the same kind of machine, and `machine_kind` names
that kind (CPU model, cores, the instruction sets that set inference speed, the GPU if any).
"""

from __future__ import annotations

import os
import platform

# Instruction sets that change inference speed by a large factor, checked in this order (the first present wins).
SPEED_FLAGS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")


def _cpuinfo() -> tuple[str, set[str]]:
    """The CPU's model name and flags from /proc/cpuinfo (empty where it cannot be read)."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def machine_kind() -> dict[str, object]:
    """What sets this machine's speed: CPU model, usable cores, the fastest of SPEED_FLAGS, and the first GPU."""
    model, flags = _cpuinfo()
    gpu = None
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": model,
        "cores": cores,
        "isa": next((flag for flag in SPEED_FLAGS if flag in flags), "baseline"),
        "gpu": gpu,
    }


def describe(kind: dict[str, object] | None) -> str:
    """One line for messages: 'AMD EPYC, 2 cores, avx2, no GPU' (or 'unrecorded')."""
    if not kind:
        return "unrecorded"
    return f"{kind.get('cpu')}, {kind.get('cores')} cores, {kind.get('isa')}, {kind.get('gpu') or 'no GPU'}"
