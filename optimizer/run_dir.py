"""The run directory: config snapshot, append-only update log (the checkpoint), metrics.

    RUN_DIR/config.yaml     the validated config the run started with
    RUN_DIR/updates.jsonl   one ESStep per line: {"step", "sigma", "terms": [[seed, coeff], ...], ["rule", "params",]
                            "parent_fingerprint" (every server's fingerprint before the step), "checksum"}
    RUN_DIR/metrics.jsonl   one IterationRecord per line (rewards, tokens, timings, fingerprint)
    RUN_DIR/summary.json    the RunSummary of a finished run (wall time, tokens, peak memory)
    RUN_DIR/logs/           logs of locally started servers

The update log plus the base model reproduce the trained weights anywhere. Each record is one
line written with a single write and fsync'd; a checksum over its content lets a reader tell a
torn last line (a crash mid-write: discarded with a warning, never half-applied) from corruption
in the middle (an error: nothing after it can be trusted).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml

from seedcast.inference_server.noise.kinds import LEGACY_NOISE_KIND
from seedcast.optimizer.atomic_file import write_atomically
from seedcast.optimizer.config import ConfigError, TrainConfig
from seedcast.optimizer.config_files import load_config
from seedcast.optimizer.es.step import ESStep
from seedcast.optimizer.run_records import IterationRecord, RunSummary
from seedcast.proto.errors import SeedcastError

log = logging.getLogger("seedcast.run")
CONFIG_FILE = "config.yaml"
UPDATES_FILE = "updates.jsonl"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"


class CorruptRunError(SeedcastError, RuntimeError):
    """The run directory cannot be trusted as written; the message says where and what to do."""


class RunExistsError(SeedcastError, FileExistsError):
    """A new run was asked for in a directory that already holds one."""


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


PARENT_KEY = "parent_fingerprint"  # the fleet's fingerprint before the step: after the step before it


def encode_step(step: ESStep, parent_fingerprint: str | None = None) -> str:
    """The log line of a step (JSON floats round-trip exactly), with the fingerprint every server held before
    it, so the fingerprint after every step but the last is in the durable log."""
    body = step.to_json()
    if parent_fingerprint:
        body[PARENT_KEY] = parent_fingerprint
    return json.dumps({**body, "checksum": _checksum(body)}, separators=(",", ":")) + "\n"


def _decode_line(line: str) -> tuple[ESStep, str | None]:
    data = json.loads(line)
    checksum = data.pop("checksum", None)
    if checksum != _checksum(data):
        raise ValueError("checksum mismatch")
    return ESStep.from_json(data), data.get(PARENT_KEY)


def read_update_log(path: Path, repair: bool = False) -> list[ESStep]:
    """All intact records in order. A torn final line is dropped (and cut from the file if `repair`)."""
    return [step for step, _ in read_logged_steps(path, repair)]


def read_logged_steps(path: Path, repair: bool = False) -> list[tuple[ESStep, str | None]]:
    """Each intact record's step and the fingerprint the log records before it (None in logs written before
    steps recorded it), in order; read_update_log's rules for torn and corrupt lines."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    records: list[tuple[ESStep, str | None]] = []
    offset = 0
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, 1):
        is_last = number == len(lines) or (number == len(lines) - 1 and lines[-1] == b"")
        if not line:
            offset += 1
            continue
        try:
            if number == len(lines):  # no trailing newline: the write never finished
                raise ValueError("record not terminated")
            record = _decode_line(line.decode())
            if record[0].step != len(records) + 1:
                raise ValueError(f"step {record[0].step} where step {len(records) + 1} was expected")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
            if not is_last:
                raise CorruptRunError(
                    f"{path}:{number}: corrupt update record ({error}); the records after it "
                    "cannot be trusted. Restore the file from a backup, or truncate it before "
                    f"line {number} to resume from step {len(records)}"
                ) from None
            log.warning("%s: discarding a torn last record at line %d (%s)", path, number, error)
            if repair:
                with path.open("r+b") as handle:
                    handle.truncate(offset)
                    os.fsync(handle.fileno())
            break
        records.append(record)
        offset += len(line) + 1
    return records


# The settings an update log means something under only: on resume, an override of one is refused by name.
FIXED_FOR_A_RUN = {
    "model.name": "its update log is a list of steps away from that base model",
    "es.noise": "its update log means nothing under other noise",
    "es.momentum": "its servers' velocity follows from it",
    "es.perturbation": "its update log's steps are sums of that shape of noise",
    "es.rank": "its update log's steps are sums of noise of that rank",
    "es.lowrank_targets": "its update log's steps move those tensors only",
}


def _setting(config: TrainConfig, dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


class RunDirectory:
    """Reads and writes one run's directory (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.updates_path = self.path / UPDATES_FILE
        self.metrics_path = self.path / METRICS_FILE
        self.logs_path = self.path / "logs"

    @classmethod
    def create(cls, path: str | Path, config: TrainConfig, update_log: bool = True) -> RunDirectory:
        """A new run directory with the config snapshot (and an empty update log for ES runs); refuses to
        overwrite a run."""
        run = cls(path)
        if run.updates_path.exists() or (run.path / CONFIG_FILE).exists():
            raise RunExistsError(
                f"{run.path} already holds a run; resume it with --resume {run.path} or choose another --run-dir"
            )
        run.path.mkdir(parents=True, exist_ok=True)
        run.logs_path.mkdir(exist_ok=True)
        run._write_config(config)
        if update_log:
            run.updates_path.touch()
        return run

    def _write_config(self, config: TrainConfig) -> None:
        snapshot = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
        write_atomically(self.path / CONFIG_FILE, snapshot)

    def record_resolved_config(self, config: TrainConfig) -> None:
        """Replace the snapshot with `config`, whose `auto` settings are now resolved (e.g. es.noise); only
        before the first step, while no update depends on what the snapshot said."""
        if self.updates_path.is_file() and self.updates_path.stat().st_size:
            raise ConfigError(f"{self.path} already has steps; its config is fixed")
        self._write_config(config)

    def load_config(self, overrides: list[str] | None = None) -> TrainConfig:
        """The run's config snapshot, with optional overrides (e.g. more iterations on resume)."""
        config_path = self.path / CONFIG_FILE
        if not config_path.is_file():
            raise CorruptRunError(f"{self.path} is not a run directory: {CONFIG_FILE} is missing")
        try:
            snapshot = yaml.safe_load(config_path.read_text())
        except yaml.YAMLError as error:
            raise CorruptRunError(f"{config_path} is not valid YAML: {error}") from None
        if not isinstance(snapshot, dict):
            raise CorruptRunError(f"{config_path} does not hold a config mapping")
        self.logs_path.mkdir(exist_ok=True)
        logged_noise = (snapshot.get("es") or {}).get("noise", LEGACY_NOISE_KIND)
        snapshot["es"] = {**(snapshot.get("es") or {}), "noise": logged_noise}  # not today's default, `auto`
        logged = load_config(base=snapshot)
        config = load_config(base=snapshot, overrides=overrides)
        changed = [
            f"{key} is fixed for a run: {self.path} was trained with {key} = {_setting(logged, key)!r}, and {why}; "
            f"drop the {key} override"
            for key, why in FIXED_FOR_A_RUN.items()
            if _setting(config, key) != _setting(logged, key)
        ]
        if changed:
            raise ConfigError("; ".join(changed))
        return config

    def updates(self, repair: bool = False) -> list[ESStep]:
        """The logged updates, in step order."""
        return read_update_log(self.updates_path, repair=repair)

    def logged_steps(self, repair: bool = False) -> tuple[list[ESStep], str | None]:
        """The logged updates in step order, and the fingerprint every server held before the last of them, from
        the durable log (None for a log without steps, or one written before steps recorded it): one read."""
        logged = read_logged_steps(self.updates_path, repair=repair)
        return [step for step, _ in logged], (logged[-1][1] if logged else None)

    def append_update(self, step: ESStep, parent_fingerprint: str | None = None) -> None:
        """Append one step durably (one write, flush, fsync), with the fleet's fingerprint before it."""
        line = encode_step(step, parent_fingerprint).encode()
        with self.updates_path.open("ab") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def append_metrics(self, record: IterationRecord) -> None:
        """Append one metrics line (not a checkpoint: flushed, not fsync'd)."""
        with self.metrics_path.open("a") as handle:
            handle.write(json.dumps(record.to_row()) + "\n")

    def metrics(self) -> list[IterationRecord]:
        """The metrics lines written so far (a torn last line is skipped)."""
        if not self.metrics_path.exists():
            return []
        records = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                records.append(IterationRecord.from_row(json.loads(line)))
            except json.JSONDecodeError:
                continue
        return records

    def truncate_metrics(self, iterations: int) -> None:
        """Keep metrics of the first `iterations` iterations only (on resume, after a crash)."""
        kept = [record for record in self.metrics() if record.iteration < iterations]
        write_atomically(self.metrics_path, "".join(json.dumps(record.to_row()) + "\n" for record in kept))

    def write_summary(self, summary: RunSummary) -> None:
        """Write summary.json atomically (a reader never sees half a file)."""
        write_atomically(self.path / SUMMARY_FILE, json.dumps(summary.to_json(), indent=2) + "\n")

    def summary(self) -> RunSummary | None:
        """The run's summary.json, or None while the run has not finished once."""
        path = self.path / SUMMARY_FILE
        return RunSummary.from_json(json.loads(path.read_text())) if path.is_file() else None
