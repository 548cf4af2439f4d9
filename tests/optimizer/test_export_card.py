"""What an export carries for the hub: a card built with huggingface_hub's ModelCard (license from the base
model's own card, pipeline tag, eval results, no machine path), the run's config and update log (a folder
holding just those two exports the same weights), and `--push-to-hub` through the real client to a local
stand-in hub. GRPO's model gets a card of the same shape (tests/studies/test_grpo.py runs GRPO)."""

from __future__ import annotations

import json
import shutil

import pytest
from huggingface_hub import ModelCard

from seedcast.cli import main
from tests.hub_stand_in import HubStandIn
from tests.optimizer.test_end_to_end import _overrides, _train


@pytest.fixture(scope="module")
def licensed_base(tiny_model_dir, tmp_path_factory):
    """The tiny model with a card of its own saying its license, as a folder saved from the hub has."""
    folder = tmp_path_factory.mktemp("licensed") / "tiny-base"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "README.md").write_text("---\nlicense: mit\n---\n\n# a tiny model\n")
    return str(folder)


@pytest.fixture(scope="module")
def trained(licensed_base, tmp_path_factory):
    run_path = tmp_path_factory.mktemp("card") / "card-run"
    overrides = _overrides(licensed_base, **{"fleet.local": 1, "iterations": 2, "eval_every": 1})
    run, result = _train(run_path, overrides)
    return run, result


def test_the_card_has_hub_metadata_and_no_machine_path(trained, tmp_path):
    run, result = trained
    out = tmp_path / "exported"
    assert main(["export", str(run.path), "--out", str(out)]) == 0
    card = ModelCard.load(out / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "mit" and data["pipeline_tag"] == "text-generation"
    assert data["library_name"] == "transformers" and "evolution-strategies" in data["tags"]
    assert "base_model" not in data  # a local folder is no hub id
    (evaluation,) = card.data.eval_results
    assert evaluation.metric_value == pytest.approx(result.metrics[-1].eval_reward, abs=1e-4)
    assert str(tmp_path) not in card.content and str(run.path.parent) not in card.content
    assert "tiny-base" in card.content and "card-run" in card.content  # named by their last part
    assert 'from_pretrained("exported")' in card.content and "THIS_FOLDER" not in card.content


def test_the_export_carries_the_runs_config_and_update_log_which_rebuild_it(trained, tmp_path):
    run, result = trained
    out = tmp_path / "exported"
    assert main(["export", str(run.path), "--out", str(out), "--steps", "1"]) == 0
    assert (out / "seedcast" / "config.yaml").read_bytes() == (run.path / "config.yaml").read_bytes()
    assert (out / "seedcast" / "updates.jsonl").read_bytes() == run.updates_path.read_bytes().splitlines(True)[0]
    assert main(["export", str(run.path), "--out", str(out)]) == 0
    assert (out / "seedcast" / "updates.jsonl").read_bytes() == run.updates_path.read_bytes()
    rebuilt_run = tmp_path / "from-the-export"
    shutil.copytree(out / "seedcast", rebuilt_run)
    assert main(["export", str(rebuilt_run), "--out", str(tmp_path / "rebuilt")]) == 0
    rebuilt = json.loads((tmp_path / "rebuilt" / "seedcast_export.json").read_text())
    assert rebuilt["fingerprint"] == result.fingerprint


def test_push_to_hub_uploads_the_folder_through_the_hub_client(trained, tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    run, _ = trained
    out = tmp_path / "exported"
    monkeypatch.setenv("HF_TOKEN", "hf_stand_in_token")
    with HubStandIn() as hub:
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        command = ["export", str(run.path), "--out", str(out), "--push-to-hub", "someone/es-tiny", "--private"]
        assert main(command) == 0
    assert hub.repos == {"someone/es-tiny": True} and hub.cards_checked == 1 and len(hub.commits) == 1
    pushed = hub.files["someone/es-tiny"]
    local = {path.relative_to(out).as_posix(): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert pushed == local
    assert {"model.safetensors", "README.md", "seedcast/updates.jsonl", "seedcast/config.yaml"} <= set(pushed)
    assert b'from_pretrained("someone/es-tiny")' in pushed["README.md"]
    assert "pushed to someone/es-tiny" in capsys.readouterr().out


def test_a_failed_push_keeps_the_folder_and_says_why(trained, tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    run, _ = trained
    out = tmp_path / "exported"
    monkeypatch.setenv("HF_TOKEN", "hf_stand_in_token")
    with HubStandIn() as hub:
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        hub.repos["someone/read-only"] = False  # exists, but the stand-in refuses its commits below
        monkeypatch.setattr(hub, "answer", lambda path, body: (403, {"error": "no write access"}))
        assert main(["export", str(run.path), "--out", str(out), "--push-to-hub", "someone/read-only"]) == 2
    error = capsys.readouterr().err
    assert "pushing" in error and "someone/read-only" in error and "the folder is complete" in error
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
