"""`seedcast export RUN_DIR --out DIR`: replay the update log onto the base model, write a HF folder.

The replay uses the same float32 update code and the run's noise kind (`es.noise`), on the CPU by
default. `gaussian` noise from a seed is identical on one device type only, so a run trained with it
on CUDA servers must be exported with `--device cuda` to reproduce its weights bit for bit. `table`
noise has the same values everywhere, but whether a GPU rounds the float32 update exactly as a CPU
does has not been checked: export on the servers' device type for bit-exact weights either way.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from tqdm import tqdm

from seedcast.inference_server.model_source import load_model_and_tokenizer
from seedcast.inference_server.noise.apply import apply_rule, weights_fingerprint
from seedcast.inference_server.noise.kinds import noise_source
from seedcast.inference_server.noise.lowrank import frozen_tensors
from seedcast.optimizer.hub_push import push_folder
from seedcast.optimizer.model_card import es_model_card
from seedcast.optimizer.run_dir import CONFIG_FILE, RunDirectory

# Where an export keeps the run's config and update log.
CHECKPOINT_DIR = "seedcast"


def replay_run(run_dir: str | Path, device: str = "cpu", steps: int | None = None, show_progress: bool = False):
    """(model with the replayed float32 weights on `device`, tokenizer, fingerprint, steps replayed)."""
    run = RunDirectory(run_dir)
    config = run.load_config()
    logged = run.updates()
    if steps is not None:
        logged = logged[:steps]
    model, tokenizer = load_model_and_tokenizer(config.model.name)
    model.to(device)
    master = {name: param.data for name, param in model.named_parameters()}
    vocabulary = model.get_input_embeddings().weight.shape[0]
    frozen = frozen_tensors(config.es.lowrank_targets, master, vocabulary)
    source = noise_source(config.es.noise) if logged else None  # with no step it may still say `auto`
    velocity: dict = {}  # the servers' update-rule state (momentum buffers), rebuilt step by step
    for step in tqdm(logged, desc="replaying updates", unit="step", disable=not show_progress):
        apply_rule(master, step.terms, step.rule, step.params, velocity, source, rank=step.rank, frozen=frozen)
    return model, tokenizer, weights_fingerprint(master), len(logged)


def export_run(
    run_dir: str | Path,
    out_dir: str | Path,
    device: str = "cpu",
    dtype: str = "float32",
    steps: int | None = None,
    show_progress: bool = True,
    push_to_hub: str | None = None,
    private: bool = False,
) -> dict:
    """Write DIR/{model.safetensors, config.json, tokenizer files, seedcast_export.json, README.md (the model
    card), seedcast/{config.yaml, updates.jsonl} (the run's checkpoint)}, and upload it to the hub repository
    `push_to_hub` if given (its commit URL in the summary's `pushed_to`); returns the summary."""
    model, tokenizer, fingerprint, replayed = replay_run(run_dir, device, steps, show_progress)
    expected = _logged_fingerprint(RunDirectory(run_dir), replayed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.to("cpu", getattr(torch, dtype)).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    summary = {
        "run_dir": str(run_dir),
        "steps": replayed,
        "fingerprint": fingerprint,
        "fingerprint_logged": expected,
        "matches_servers": expected == fingerprint if expected else None,
        "dtype": dtype,
    }
    (out / "seedcast_export.json").write_text(json.dumps(summary, indent=2) + "\n")
    run = RunDirectory(run_dir)
    _copy_checkpoint(run, out / CHECKPOINT_DIR, replayed)
    reference = push_to_hub or out.name
    es_model_card(run.load_config(), run.metrics(), summary, reference).save(out / "README.md")
    if push_to_hub:
        summary["pushed_to"] = push_folder(out, push_to_hub, private=private)
    return summary


def _copy_checkpoint(run: RunDirectory, folder: Path, steps: int) -> None:
    """The run's real checkpoint beside the weights: its config and the first `steps` lines of its update log
    (what `seedcast export` replays; a run folder holding these two files exports the same weights)."""
    folder.mkdir(exist_ok=True)
    shutil.copyfile(run.path / CONFIG_FILE, folder / CONFIG_FILE)
    lines = run.updates_path.read_bytes().splitlines(keepends=True)[:steps]
    (folder / run.updates_path.name).write_bytes(b"".join(lines))


def _logged_fingerprint(run: RunDirectory, step: int) -> str | None:
    """The fingerprint the servers agreed on at `step`, if the metrics recorded it."""
    for record in reversed(run.metrics()):
        if record.step == step and record.fingerprint:
            return record.fingerprint
    return None
