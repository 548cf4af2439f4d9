"""The run's noise kind when `es.noise=auto`: the fastest correct one for the fleet, chosen once at start.

Given servers (`fleet.servers`, `fleet.servers_file`) already draw some kind, set by their own
`seedcast serve --noise` (whose default, `auto`, is table on a CPU and gaussian on a GPU); a run adopts it,
and local servers it starts draw the same. With local servers only, the kind follows their device
(`fastest_kind`). The trainer writes the choice into the run's config.yaml before the first step, so the
update log keeps its meaning and `--resume`, `Sync` and `export` replay with the recorded kind.
"""

from __future__ import annotations

from seedcast.inference_server.noise.kinds import LEGACY_NOISE_KIND, NOISE_KINDS, fastest_kind
from seedcast.optimizer.config import ModelConfig, TrainConfig
from seedcast.proto.errors import SeedcastError


class NoiseMismatchError(SeedcastError, RuntimeError):
    """A server draws a different kind of noise than the run: its members would not match the updates."""


def local_device_type(model: ModelConfig) -> str:
    """The device type local servers will run on: "cuda" or "cpu" (`auto` is CUDA when this machine has it)."""
    if model.device != "auto":
        return "cuda" if model.device.startswith("cuda") else "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_noise(config: TrainConfig, given_servers: dict[str, str]) -> str:
    """The run's noise kind: `es.noise` when set, else the given servers' kind (they must agree; a server
    that reports none predates the field and draws gaussian), else the fastest for the local device."""
    if config.es.noise != "auto":
        return config.es.noise
    kinds = {address: kind or LEGACY_NOISE_KIND for address, kind in given_servers.items()}
    unknown = {address: kind for address, kind in kinds.items() if kind not in NOISE_KINDS}
    if unknown:  # never adopted, nor written into config.yaml, where it would stop every resume
        listing = ", ".join(f"{address} reports {kind[:40]!r}" for address, kind in sorted(unknown.items()))
        raise NoiseMismatchError(
            f"servers report a noise kind this optimizer does not know ({listing}; known: "
            f"{', '.join(NOISE_KINDS)}); upgrade them to this version, or set es.noise"
        )
    if len(set(kinds.values())) > 1:
        listing = ", ".join(f"{address} draws {kind}" for address, kind in sorted(kinds.items()))
        raise NoiseMismatchError(
            f"es.noise=auto needs the servers to agree on a noise kind, but {listing}; restart them with one "
            "`seedcast serve --noise KIND`, or set es.noise and restart the others"
        )
    if kinds:
        return next(iter(kinds.values()))
    return fastest_kind(local_device_type(config.model))
