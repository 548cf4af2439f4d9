"""The CUDA path, checked where it runs: perturb/restore, noise, updates, Sync, export and generation on a GPU.

These run on a CUDA device (`bench/gpu_check/run.py` runs them first, docs/gpu.md). The GPU check's dry run
sets SEEDCAST_CHECK_DEVICE=cpu and runs them on the CPU, so they never rot on machines without a GPU; the
default suite leaves them out (`-m "not gpu"`), so they are never reported as skipped there.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import grpc
import pytest
import torch

from seedcast.cli import main
from seedcast.inference_server.backends.base import Sampling
from seedcast.inference_server.backends.hf import HFBackend
from seedcast.inference_server.noise.apply import weights_fingerprint
from seedcast.inference_server.server import start_server
from seedcast.optimizer.run_dir import RunDirectory
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from tests.spies import record_calls

pytestmark = pytest.mark.gpu
DEVICE_VARIABLE = "SEEDCAST_CHECK_DEVICE"
NOISE_KINDS = ("gaussian", "table")
PROMPTS = ["What is 12 + 30?", "Name a prime number.", "Count to five.", "Say hello."]


@pytest.fixture(scope="module")
def device() -> str:
    """The CUDA device, or the device the GPU check's dry run names."""
    named = os.environ.get(DEVICE_VARIABLE)
    if named:
        return named
    if not torch.cuda.is_available():
        pytest.skip(f"no CUDA device (set {DEVICE_VARIABLE}=cpu to run these on the CPU)")
    return "cuda"


def _backend(model_dir: str, device: str, noise: str, **options) -> HFBackend:
    return HFBackend(model_dir, device=device, dtype="auto", threads=1, noise=noise, **options)


def _inference_weights(backend: HFBackend) -> dict[str, torch.Tensor]:
    backend.sync_weights()
    return {name: param.detach().clone() for name, param in backend.params.items()}


@pytest.mark.parametrize("noise", NOISE_KINDS)
def test_perturb_then_restore_is_bit_exact(tiny_model_dir, device, noise):
    backend = _backend(tiny_model_dir, device, noise, pair_cache=True)
    before, master = _inference_weights(backend), backend.fingerprint()
    partner_copies = record_calls(backend, "_write_partner")
    for seed, sign in ((7, 1), (7, -1), (8, 1)):  # the second comes from the pair cache
        backend.perturb(seed, 0.05, sign)
        perturbed = _inference_weights(backend)
        assert any(not torch.equal(perturbed[name], before[name]) for name in before)
        backend.restore()
        after = _inference_weights(backend)
        assert all(torch.equal(after[name], before[name]) for name in before), f"seed {seed} sign {sign}"
    assert backend.fingerprint() == master and len(partner_copies) == 1


NOISE_DIGEST = """
import hashlib, sys, torch
from seedcast.inference_server.noise.kinds import noise_source
source = noise_source(sys.argv[1]); source.prepare(sys.argv[2])
digest = hashlib.sha256()
for name in ("model.layers.0.mlp.up_proj.weight", "lm_head.weight"):
    digest.update(source.noise(int(sys.argv[3]), name, (257, 33), sys.argv[2]).cpu().numpy().tobytes())
print(digest.hexdigest())
"""


@pytest.mark.parametrize("noise", NOISE_KINDS)
def test_noise_is_a_function_of_seed_and_tensor_name_in_any_process(device, noise):
    def digest(seed: int) -> str:
        command = [sys.executable, "-c", NOISE_DIGEST, noise, device, str(seed)]
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()

    first, second, other = digest(11), digest(11), digest(12)
    assert first == second != other


@pytest.mark.parametrize("noise", NOISE_KINDS)
def test_an_update_equals_its_replay(tiny_model_dir, device, noise):
    steps = [[(21, 0.02), (22, -0.01)], [(23, 0.015)]]
    live = _backend(tiny_model_dir, device, noise)
    base = live.fingerprint()
    for terms in steps:
        live.perturb(terms[0][0], 0.05)  # members ran in between, as in a run
        live.restore()
        live.apply_update(terms, "momentum", {"momentum": 0.5})
    replayed = _backend(tiny_model_dir, device, noise)
    for terms in steps:
        replayed.apply_update(terms, "momentum", {"momentum": 0.5})
    assert live.fingerprint() == replayed.fingerprint() != base


def test_generation_is_deterministic_for_a_fixed_batch(tiny_model_dir, device):
    backend = _backend(tiny_model_dir, device, "table")
    for sampling in (
        Sampling(temperature=1.0, max_new_tokens=8, samples_per_prompt=3, seed=5),
        Sampling(temperature=0.0, max_new_tokens=8),
    ):
        first = backend.generate(PROMPTS, sampling)
        second = backend.generate(PROMPTS, sampling)
        assert [[c.text for c in p] for p in first] == [[c.text for c in p] for p in second]
    sampled = backend.generate(PROMPTS, Sampling(temperature=1.0, max_new_tokens=8, samples_per_prompt=3, seed=5))
    other_seed = backend.generate(PROMPTS, Sampling(temperature=1.0, max_new_tokens=8, samples_per_prompt=3, seed=6))
    assert [[c.text for c in p] for p in sampled] != [[c.text for c in p] for p in other_seed]


@pytest.mark.parametrize("noise", NOISE_KINDS)
def test_a_run_on_the_device_is_reproduced_by_sync_and_by_export(tmp_path, tiny_model_dir, device, noise):
    run_dir = tmp_path / "run"
    overrides = {
        "model.name": tiny_model_dir,
        "model.device": device,
        "iterations": 2,
        "batch_size": 3,
        "eval_every": 0,
        "task.evaluator": "tests.tiny_model:digit_fraction_reward",
        "task.synthetic_size": 50,
        "sampling.max_new_tokens": 6,
        "sampling.temperature": 1.0,
        "es.population": 4,
        "es.sigma": 0.05,
        "es.learning_rate": 0.01,
        "es.momentum": 0.5,
        "es.noise": noise,
        "fleet.local": 1,
        "fleet.threads_per_server": 1,
    }
    command = ["train", "--run-dir", str(run_dir), "--no-progress", *(f"{k}={v}" for k, v in overrides.items())]
    assert main(command) == 0
    run = RunDirectory(run_dir)
    trained = run.metrics()[-1].fingerprint
    assert trained and [u.step for u in run.updates()] == [1, 2]

    async def sync_fresh_server() -> str:
        running = await start_server(_backend(tiny_model_dir, device, noise), "127.0.0.1", 0)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                requests = [step.to_request() for step in run.updates()]
                reply = await pb_grpc.InferenceServerStub(channel).Sync(iter(requests))
                return reply.weights_fingerprint
        finally:
            await running.stop(0)

    assert asyncio.run(sync_fresh_server()) == trained
    out = tmp_path / "exported"
    assert main(["export", str(run_dir), "--out", str(out), "--device", device]) == 0
    assert json.loads((out / "seedcast_export.json").read_text())["matches_servers"] is True
    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert weights_fingerprint(dict(exported.named_parameters())) == trained
