"""Device and dtype selection: use the fastest inference dtype the device really supports."""

from __future__ import annotations

from functools import lru_cache

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True when the CPU has bf16 dot-product instructions (avx512_bf16 or AMX), where bf16 is ~2x fp32."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = cpuinfo.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_device(device: str) -> torch.device:
    """`auto` is the first CUDA device when there is one, else the CPU."""
    if device == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device} requested but CUDA is not available; use --device cpu")
    return resolved


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """`auto` picks bf16 where the hardware runs it natively (CUDA with bf16, CPUs with avx512_bf16), else fp32."""
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; choose one of auto, {', '.join(DTYPES)}")
        return DTYPES[dtype]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32
