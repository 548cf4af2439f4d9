"""Device and dtype selection: use the fastest inference dtype the device really supports."""

from __future__ import annotations

from functools import lru_cache

import torch

from seedcast.inference_server.backends.dtype_names import AUTO, DTYPE_NAMES

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


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
            raise ValueError(f"unknown dtype {dtype!r}; choose one of {AUTO}, {', '.join(DTYPE_NAMES)}")
        return DTYPES[dtype]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def available_memory_bytes(device: torch.device) -> int | None:
    """Memory free for new tensors on `device`: the kernel's MemAvailable for the CPU, the driver's free
    bytes for CUDA; None when it cannot be read."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def pair_cache_by_default(device: torch.device, copy_bytes: int) -> bool:
    """`pair_cache=auto`: on a CPU, when four more copies of the inference weights would still fit. The cache
    saves a noise draw per mirrored pair, most of a member's overhead on a CPU (docs/performance.md); on a
    GPU the draw is cheap and memory is what ES saves, so it stays off there unless asked for."""
    if device.type != "cpu":
        return False
    available = available_memory_bytes(device)
    return available is not None and available >= 4 * copy_bytes
