"""Noise kinds by name (`es.noise`, `seedcast serve --noise`), cast roundings (`es.rounding`) and perturbation
shapes (`es.perturbation`): the one list of each, with the help text the configs share."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the kind names load without torch (the CLI's flags list them)
    from seedcast.inference_server.noise.source import NoiseSource

NOISE_KINDS = {
    "gaussian": "fresh seeded randn per tensor",
    "table": "slices of one fixed 64 MiB table of Gaussian samples, about 3x cheaper to perturb on a CPU",
}
AUTO = "auto"  # what a user may also set: a kind chosen once the device is known (fastest_kind)
LEGACY_NOISE_KIND = "gaussian"  # what runs and servers from before the noise setting drew (they do not name it)
ROUNDINGS = {  # how perturbed weights are cast to the inference dtype (noise/rounding.py)
    "nearest": "round to nearest",
    "stochastic": "stochastic rounding, its randomness a pure function of seed and tensor name, so perturbations "
    "below bf16's resolution survive in expectation",
}

PERTURBATIONS = {  # the shape of a member's noise (`es.perturbation`; noise/lowrank.py)
    "full": "every weight gets its own Gaussian noise (full rank)",
    "lowrank": "each 2-D weight gets A·Bᵀ/√r of rank es.rank (EGGROLL), 1-D weights full noise; the update still "
    "moves every weight",
}
FULL_RANK = 0  # the rank a full-rank member or step carries on the wire and in the log
LOWRANK_TARGETS = {  # which tensors low-rank members perturb and their steps move (`es.lowrank_targets`)
    "all": "every tensor full-rank ES trains: 2-D weights low rank, 1-D tensors full noise",
    "linear": "only the 2-D projection weights (not the token embedding or LM head, whose first dimension is the "
    "vocabulary, nor 1-D norm scales and biases, which stay frozen): what vLLM's multi-LoRA carries, so vllm "
    "servers can batch members",
}
ALL_TARGETS = "all"


def fastest_kind(device_type: str) -> str:
    """The kind `auto` becomes on a device type: `table` on a CPU, where drawing Gaussian noise is most of a
    member's overhead and table slices cut a perturbation's cost about 3x (docs/performance.md); `gaussian`
    elsewhere, where the generator runs on the accelerator, until the GPU check measures table against it."""
    return "table" if device_type == "cpu" else "gaussian"


def resolve_kind(kind: str, device_type: str) -> str:
    """A concrete kind for `kind` ("auto" or a kind) on a device type; unknown kinds are refused."""
    if kind == AUTO:
        return fastest_kind(device_type)
    if kind not in NOISE_KINDS:
        raise ValueError(f"unknown noise kind {kind!r}; choose one of {AUTO}, {', '.join(NOISE_KINDS)}")
    return kind


def noise_source(kind: str) -> NoiseSource:
    """The source for a noise kind ("gaussian" or "table"); the table is built once per process."""
    if kind == "gaussian":
        from seedcast.inference_server.noise.gaussian import GAUSSIAN

        return GAUSSIAN
    if kind == "table":
        from seedcast.inference_server.noise.table import shared_noise_table

        return shared_noise_table()
    raise ValueError(f"unknown noise kind {kind!r}; choose one of {', '.join(NOISE_KINDS)}")
