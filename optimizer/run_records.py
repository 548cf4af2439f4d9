"""The typed records a run writes: one `IterationRecord` per line of metrics.jsonl, one `RunSummary`
in summary.json. ES and the GRPO baseline write the same types, so `seedcast compare`, the plots and
the CLI read both without knowing which method wrote them.

A row leaves out the fields a method does not measure (None), and reading ignores keys it does not
know, so run directories written by other versions stay readable.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from seedcast.proto.telemetry import MEMBER_PHASES, phase_field

BASELINE_ITERATION = -1  # the row of the base model's eval reward, before the first step


@dataclass
class IterationRecord:
    """One iteration (ES) or optimizer step (GRPO); `iteration` -1 holds the base model's eval reward."""

    iteration: int
    step: int
    seconds: float | None = None
    reward_mean: float | None = None  # ES: member fitness over the population; GRPO: the sampled rollouts
    reward_std: float | None = None
    reward_max: float | None = None
    reward_min: float | None = None
    members_ok: int | None = None
    members_failed: int | None = None
    members_reassigned: int | None = None
    members_dropped: int | None = None
    servers_active: int | None = None
    completions: int | None = None
    completion_tokens: int | None = None
    truncated_answers: int | None = None  # ES: answers of this iteration's members cut at max_new_tokens
    tokens_per_second: float | None = None
    update_terms: int | None = None
    peak_rss_bytes: int | None = None
    fingerprint: str | None = None
    # Mean seconds per member phase (perturb, generate, score, restore), from the servers' own timings.
    phase_seconds: dict[str, float | None] = field(default_factory=dict)
    eval_reward: float | None = None  # greedy reward of the unperturbed weights on the fixed eval set

    def to_row(self) -> dict[str, Any]:
        """The metrics.jsonl object: measured fields only, phases as `<phase>_seconds` keys."""
        row = {}
        for name, value in asdict(self).items():
            if name == "phase_seconds":
                row.update({phase_field(phase): seconds for phase, seconds in value.items()})
            elif value is not None:
                row[name] = value
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> IterationRecord:
        """Read a metrics.jsonl object (unknown keys ignored)."""
        known = {f.name for f in fields(cls)} - {"phase_seconds"}
        values = {name: value for name, value in row.items() if name in known}
        phases = {phase: row[phase_field(phase)] for phase in MEMBER_PHASES if phase_field(phase) in row}
        return cls(**values, phase_seconds=phases)

    @property
    def is_baseline(self) -> bool:
        """Whether this is the base model's row (no training step behind it)."""
        return self.iteration == BASELINE_ITERATION


@dataclass
class RunSummary:
    """What a finished run cost: the summary.json of an ES or GRPO run directory."""

    method: str  # es | grpo
    steps: int
    wall_seconds: float
    completion_tokens: int
    peak_rss_bytes: int | None = None
    peak_memory_of: str | None = None  # whose peak: "one ES inference server" or "the GRPO training process"
    completions: int | None = None
    fingerprint: str | None = None
    wall_seconds_this_session: float | None = None
    servers_measured: int | None = None
    model_dir: str | None = None
    trl_version: str | None = None
    device: str | None = None
    machine: dict[str, Any] | None = None  # optimizer.machine.machine_kind() where the run was timed
    members_failed: int | None = None  # ES: members that returned an error, over the run (this session)
    idle_iterations: int | None = None  # ES: iterations without an update (all failed, or all scored alike)
    truncated_answers: int | None = None  # ES: member answers cut at max_new_tokens, over the run's iterations

    def to_json(self) -> dict[str, Any]:
        """The summary.json object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        """Read summary.json, including those written before the fields had one name each."""
        data = dict(data)
        if "server_peak_rss_bytes" in data:  # ES summaries named the peak after the server
            data.setdefault("peak_rss_bytes", data.pop("server_peak_rss_bytes"))
        if data.get("peak_memory_of") is None:
            data["peak_memory_of"] = (
                "the GRPO training process" if data.get("method") == "grpo" else "one ES inference server"
            )
        known = {f.name for f in fields(cls)}
        return cls(**{name: value for name, value in data.items() if name in known})
