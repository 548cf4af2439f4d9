"""The bundled SmolLM2-135M-Instruct: loads from its GGUF, answers, and a short ES run works (slow)."""

from __future__ import annotations

import pytest

from seedcast.inference_server.model_source import BUNDLED_MODEL, bundled_model_path

pytestmark = pytest.mark.slow


def test_bundled_model_answers_simple_sums():
    from seedcast.inference_server.backends.base import Sampling
    from seedcast.inference_server.backends.hf import HFBackend

    assert bundled_model_path().suffix == ".gguf"
    backend = HFBackend(BUNDLED_MODEL, device="cpu", threads=2)
    assert backend.info().parameters == 134_515_008
    completions = backend.generate(
        ["What is 2 + 3? Reply with only the final number."], Sampling(temperature=0.0, max_new_tokens=8)
    )
    assert "5" in completions[0][0].text
    before = backend.fingerprint()
    backend.perturb(1, 0.002)
    backend.restore()
    assert backend.fingerprint() == before


def test_short_es_run_on_the_bundled_model(tmp_path):
    from seedcast.cli import main

    code = main(
        [
            "train",
            "--no-progress",
            "--run-dir",
            str(tmp_path / "run"),
            "iterations=1",
            "batch_size=4",
            "es.population=2",
            "eval_every=0",
            "sampling.max_new_tokens=8",
        ]
    )
    assert code == 0
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"members_ok": 2' in lines[0]
