"""The vllm backend's refusals, checked without vLLM: each names the problem and what to do."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
import torch

from seedcast.cli import main
from seedcast.inference_server.backends import create_backend
from seedcast.inference_server.backends.checkpoint_folder import checkpoint_parameters
from seedcast.inference_server.backends.vllm_support import (
    BackendUnavailableError,
    MasterMemoryError,
    check_architecture,
    check_master_fits,
    sampling_seed,
)


def test_missing_vllm_says_how_to_install_it(monkeypatch, tiny_model_dir, capsys):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` fail
    with pytest.raises(BackendUnavailableError, match=r"not installed.*seedcast\[vllm\].*setup-vllm"):
        create_backend("vllm", tiny_model_dir, device="cpu")
    assert main(["serve", "--backend", "vllm", "--model", tiny_model_dir, "--port", "0"]) == 2
    assert "error: the vllm backend needs vLLM" in capsys.readouterr().err  # one line, no traceback


def test_pair_cache_is_refused_before_anything_loads(tiny_model_dir, capsys):
    with pytest.raises(BackendUnavailableError, match="pair-cache.*hf backend"):
        create_backend("vllm", tiny_model_dir, device="cpu", pair_cache=True)
    assert main(["serve", "--backend", "vllm", "--model", tiny_model_dir, "--port", "0", "--pair-cache"]) == 2
    assert "pair-cache is a feature of the hf backend" in capsys.readouterr().err


def _fake_vllm(*architectures: str) -> SimpleNamespace:
    return SimpleNamespace(
        __version__="0.32.0", ModelRegistry=SimpleNamespace(get_supported_archs=lambda: set(architectures))
    )


def test_unmappable_architecture_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["FancyNetForCausalLM"]}))
    with pytest.raises(BackendUnavailableError, match="FancyNetForCausalLM.*cannot map.*--backend hf"):
        check_architecture(str(tmp_path), _fake_vllm("LlamaForCausalLM"))
    check_architecture(str(tmp_path), _fake_vllm("LlamaForCausalLM", "FancyNetForCausalLM"))  # no error


def test_master_that_does_not_fit_says_how_much_it_needs():
    with pytest.raises(MasterMemoryError, match=r"10,000,000,000,000 parameters needs 37252\.90 GiB on cpu"):
        check_master_fits(10**13, torch.device("cpu"))
    check_master_fits(1000, torch.device("cpu"))  # 4 kB fits


def test_checkpoint_parameters_are_counted_from_the_safetensors_headers(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert checkpoint_parameters(tiny_model_dir) == sum(p.numel() for p in model.parameters())
    assert checkpoint_parameters("some-org/some-hub-model") is None


def test_sampling_seeds_differ_per_prompt_and_member_and_repeat():
    seeds = {sampling_seed(member, prompt) for member in range(20) for prompt in range(20)}
    assert len(seeds) == 400 and all(0 <= s < 2**31 for s in seeds)
    assert sampling_seed(7, 3) == sampling_seed(7, 3)


def test_local_vllm_servers_get_their_own_cores(monkeypatch, tmp_path):
    from seedcast.optimizer.config_files import load_config
    from seedcast.optimizer.fleet.local import LocalFleet

    monkeypatch.setattr("os.cpu_count", lambda: 4)
    fleet = LocalFleet(load_config(overrides=["fleet.local=3", "fleet.threads_per_server=2"]), tmp_path)
    assert [fleet.cpu_cores(i) for i in range(3)] == ["0-1", "2-3", "0-1"]


def test_an_unknown_backend_in_a_config_is_reported_with_the_choices():
    from seedcast.optimizer.config import ConfigError
    from seedcast.optimizer.config_files import load_config

    with pytest.raises(ConfigError, match=r"model.backend: unknown backend 'vlm'; choose one of hf, vllm"):
        load_config(overrides=["model.backend=vlm"])
    assert load_config(overrides=["model.backend=vllm"]).model.backend == "vllm"
