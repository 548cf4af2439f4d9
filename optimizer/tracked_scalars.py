"""The names a metrics.jsonl row goes to the trackers under, chosen to overlay with TRL's: `train/reward`,
`train/reward_std`, `train/completions/mean_length`, `train/completions/clipped_ratio`, `eval/...`, the same for
ES and GRPO, so both methods (and a run of TRL's own GRPOTrainer) draw on one chart. The file keeps its flat
names; docs/usage.md#experiment-trackers gives every name with its unit."""

from __future__ import annotations

from seedcast.optimizer.run_records import IterationRecord
from seedcast.proto.telemetry import MEMBER_PHASES, phase_field

# metrics.jsonl field -> tracker name. Per iteration (ES) or optimizer step (GRPO) unless the name says more.
TRACKED_NAMES: dict[str, str] = {
    "reward_mean": "train/reward",  # mean reward per answer; ES: over every member's answers
    "reward_std": "train/reward_std",  # ES: across members' fitness; GRPO: across the step's rollouts
    "reward_max": "train/reward_max",
    "reward_min": "train/reward_min",
    "eval_reward": "eval/reward",  # greedy, unperturbed weights, the fixed eval set
    "completions": "train/completions/count",
    "completion_tokens": "train/completions/tokens",
    "truncated_answers": "train/completions/clipped",
    "seconds": "perf/step_seconds",
    "tokens_per_second": "perf/tokens_per_second",
    "peak_rss_bytes": "perf/peak_rss_bytes",
    "members_ok": "es/members_ok",
    "members_failed": "es/members_failed",
    "members_reassigned": "es/members_reassigned",
    "members_dropped": "es/members_dropped",
    "update_terms": "es/update_terms",
    "servers_active": "fleet/servers_active",
    **{phase_field(phase): f"perf/member_{phase_field(phase)}" for phase in MEMBER_PHASES},
}
# Not tracked: the row's position (iteration and step: the tracker's own step) and the fingerprint (a string).
UNTRACKED = ("iteration", "step", "fingerprint")


def tracked_scalars(record: IterationRecord) -> dict[str, float]:
    """A metrics.jsonl row as tracker scalars, with the ratios TRL logs: mean completion length (tokens per
    answer) and the clipped ratio (answers cut at max_new_tokens, per answer)."""
    row = record.to_row()
    scalars = {  # a phase no member measured (all failed) stays None in the row, and out of the trackers
        TRACKED_NAMES[key]: float(value) for key, value in row.items() if key in TRACKED_NAMES and value is not None
    }
    if row.get("completions"):
        if "completion_tokens" in row:
            scalars["train/completions/mean_length"] = row["completion_tokens"] / row["completions"]
        if "truncated_answers" in row:
            scalars["train/completions/clipped_ratio"] = row["truncated_answers"] / row["completions"]
    return scalars
