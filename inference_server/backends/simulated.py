"""SimulatedLatencyTestBackend: a test double with no model, for scheduler tests and benchmarks.

It "generates" after a fixed delay and answers with text derived from the perturbation seed, and
keeps a small float32 master so updates and fingerprints behave like a real backend's. It is not in
the backend registry: `seedcast serve` never runs it; tests and `bench/` construct it directly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import torch

from seedcast.inference_server.backends.base import BackendInfo, Completion, Sampling, raise_if_stopped
from seedcast.inference_server.noise.apply import apply_rule, weights_fingerprint
from seedcast.inference_server.noise.kinds import noise_source
from seedcast.inference_server.noise.update_rules import PLAIN_RULE


class SimulatedLatencyTestBackend:
    """Sleeps `latency_seconds` per generate call; completions are the active seed's digits."""

    name = "simulated-test"
    supports_entropy = True

    def __init__(self, latency_seconds: float = 0.01, noise: str = "gaussian", latency_prompts: int = 0) -> None:
        self.latency_seconds = latency_seconds
        # With latency_prompts > 0, latency_seconds is the cost of that many prompts and a call costs its share
        # (prompt-sharded members); otherwise every call costs latency_seconds.
        self.latency_prompts = latency_prompts
        self.noise = noise_source(noise)
        self.master = {"w": torch.zeros(8)}
        self.velocity: dict[str, torch.Tensor] = {}
        self.active_seed: int | None = None

    def perturb(self, seed: int, sigma: float, sign: int = 1, stochastic_rounding: bool = False, rank: int = 0) -> None:
        self.active_seed = seed * sign

    def restore(self) -> None:
        self.active_seed = None

    def sync_weights(self) -> None:
        """Nothing is deferred here."""

    def apply_update(
        self,
        terms: list[tuple[int, float]],
        rule: str = PLAIN_RULE,
        params: Mapping[str, float] | None = None,
        rank: int = 0,
    ) -> None:
        apply_rule(self.master, terms, rule, params or {}, self.velocity, self.noise, threads=1, rank=rank)

    def generate(
        self,
        prompts: list[str],
        sampling: Sampling,
        system_prompt: str = "",
        with_entropy: bool = False,
        stop: threading.Event | None = None,
    ) -> list[list[Completion]]:
        """After the latency (cut short, with GenerationStopped, once `stop` is set), the active seed's digits."""
        share = len(prompts) / self.latency_prompts if self.latency_prompts else 1.0
        if stop is None:
            time.sleep(self.latency_seconds * share)
        else:
            stop.wait(self.latency_seconds * share)
        raise_if_stopped(stop)
        text = str(abs(self.active_seed or 0) % 97)
        completion = Completion(text=text, tokens=1, truncated=False, mean_entropy=0.0 if with_entropy else None)
        return [[completion] * sampling.samples_per_prompt for _ in prompts]

    def fingerprint(self) -> str:
        return weights_fingerprint(self.master)

    def info(self) -> BackendInfo:
        return BackendInfo(
            model="simulated", backend=self.name, device="none", dtype="float32", parameters=8, noise=self.noise.kind
        )
