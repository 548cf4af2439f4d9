"""What a path given to `--init-from`, `seedcast compare` or `seedcast eval` is, and where its weights are.

an ES run directory    config.yaml + updates.jsonl (weights = base model + replayed updates)
a GRPO run directory   config.yaml + model/ (the trained Hugging Face folder); without model/ (a published
                       copy keeps only its numbers, trl_log.jsonl among them) it is still a GRPO run, compared
                       through cached evaluations, but its weights cannot be loaded
a model folder         config.json (from `seedcast export`, a GRPO run's model/, or any HF model)
"""

from __future__ import annotations

import json
from pathlib import Path

from seedcast.optimizer.config import ConfigError
from seedcast.optimizer.run_dir import CONFIG_FILE, UPDATES_FILE, RunDirectory

GRPO_MODEL_DIR = "model"
INIT_MODEL_DIR = "init-model"  # where `--init-from` exports an ES run's weights, inside the new run's folder
GRPO_LOG_FILE = "trl_log.jsonl"  # as analysis.grpo writes it; every GRPO run has one


def run_kind(path: str | Path) -> str:
    """`es`, `grpo` or `model`; a ConfigError for anything else."""
    folder = Path(path)
    if (folder / CONFIG_FILE).is_file() and (
        (folder / GRPO_MODEL_DIR / "config.json").is_file() or (folder / GRPO_LOG_FILE).is_file()
    ):
        return "grpo"
    if (folder / CONFIG_FILE).is_file() and (folder / UPDATES_FILE).is_file():
        return "es"
    if (folder / "config.json").is_file():
        return "model"
    raise ConfigError(
        f"{folder} is not an ES run (config.yaml + updates.jsonl), a GRPO run (config.yaml + model/) "
        "or a Hugging Face model folder (config.json)"
    )


def model_folder(path: str | Path, export_to: str | Path) -> str:
    """A folder `transformers` loads with the weights at `path`; an ES run is exported to `export_to` first."""
    folder = Path(path)
    kind = run_kind(folder)
    if kind == "model":
        return str(folder)
    if kind == "grpo":
        if not (folder / GRPO_MODEL_DIR / "config.json").is_file():
            raise ConfigError(
                f"{folder} is a GRPO run without its weights ({GRPO_MODEL_DIR}/ is absent, as in a published copy): "
                "evaluate it where it was trained, or compare it through a cached evaluation (OUT/evals/LABEL)"
            )
        return str(folder / GRPO_MODEL_DIR)
    from seedcast.optimizer.export import export_run

    target = Path(export_to)
    if not (target / "config.json").is_file():
        summary = export_run(folder, target)
        if summary["matches_servers"] is False:
            raise ConfigError(
                f"replaying {folder} gave fingerprint {summary['fingerprint']}, not the servers' "
                f"{summary['fingerprint_logged']}; export it on the device type it was trained on"
            )
    return str(target)


def started_from(run_dir: str | Path) -> Path | None:
    """The run whose weights the run at `run_dir` started from (`--init-from`), or None: a GRPO run's
    `model/` folder, or an ES run's export (its seedcast_export.json names the run; a relative name is
    taken from the working directory, as the export wrote it). Only runs that still exist count."""
    try:
        folder = Path(RunDirectory(run_dir).load_config().model.name)
    except (ConfigError, OSError):
        return None
    if folder.name == INIT_MODEL_DIR and not folder.is_dir():  # recorded by absolute path; the run has moved
        folder = Path(run_dir) / INIT_MODEL_DIR
    if folder.name == GRPO_MODEL_DIR and _is_run(folder.parent):
        return folder.parent
    export = folder / "seedcast_export.json"
    if export.is_file():
        source = json.loads(export.read_text()).get("run_dir")
        if source and _is_run(Path(source)):
            return Path(source)
    return None


def _is_run(folder: Path) -> bool:
    try:
        return run_kind(folder) in ("es", "grpo")
    except ConfigError:
        return False
