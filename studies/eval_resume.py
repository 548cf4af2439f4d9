"""An evaluation's finished Sample calls on disk (OUT/partial.jsonl), so that an evaluation cut off (the end of a
session, a lost machine, Ctrl-C) goes on from where it stopped when the same command runs again.

Every Sample call's sampling seed comes from its position in the evaluation (`evaluate.run_eval`), so a call's
answers do not depend on when, or on which server, it ran: the calls kept from before and those made now form
the same evaluation as one uninterrupted run (tests/studies/test_eval_resume.py checks it sample for sample).

The file's first line records what the samples were drawn with: the server's fingerprint of the weights, the
problems, the options, the evaluator, the instruction, the backend and the dtype. A file recorded for anything
else is set aside as partial.stale.jsonl, never mixed in. Each finished call is appended as one line and flushed
to disk; a line cut off mid-write (the process killed) is dropped, and the file rewritten without it, on the
next start. The file is removed once results.json and samples.jsonl are written.

Each call's line also keeps the seconds it took and the kind of machine it ran on, so `timing` can say how long
the evaluation takes to sample on this kind of machine (OUT/timing.json): what the next evaluation of its kind will
take here. Calls an earlier session made on another kind (a faster CPU, say) are not mixed into that figure.

An evaluation longer than a session can also stop on purpose (`--sample-until HH:MM`): it starts no call that would
not end by then (`call_fits`, from the longest call so far) and raises `EvaluationPaused`, its finished calls kept
here for the same command to resume, in this session or, with the file carried over (the bench commits it
compressed), a later one.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from seedcast.optimizer.atomic_file import write_atomically
from seedcast.optimizer.machine import machine_kind
from seedcast.proto import seedcast_pb2 as pb

log = logging.getLogger("seedcast.eval")
PARTIAL_FILE = "partial.jsonl"
STALE_FILE = "partial.stale.jsonl"
TIMING_FILE = "timing.json"  # how long the finished evaluation took to sample, and on which kind of machine


def problem_records(reply: pb.SampleReply) -> list[dict]:
    """A Sample reply's problems as plain records: what results.json and samples.jsonl are made from."""
    return [
        {
            "completions": list(p.completions),
            "rewards": list(p.rewards),
            "tokens": list(p.completion_tokens),
            "truncated": list(p.truncated),
            "entropies": list(p.mean_token_entropy),
        }
        for p in reply.problems
    ]


class EvaluationPaused(Exception):
    """An evaluation stopped at its `--sample-until` time with calls left to make (kept in OUT/partial.jsonl)."""

    def __init__(self, out_dir: Path, made: int, calls: int) -> None:
        super().__init__(
            f"{out_dir}: {made} of {calls} Sample calls made, {calls - made} left; they are kept in "
            f"{out_dir / PARTIAL_FILE}, and the same command resumes from there"
        )
        self.out_dir, self.made, self.calls = out_dir, made, calls


class EvalProgress:
    """The finished calls of one evaluation in OUT/partial.jsonl, for the samples recorded in `header`."""

    def __init__(self, out_dir: Path, header: dict, machine: dict | None = None) -> None:
        self.path = out_dir / PARTIAL_FILE
        self.header = json.loads(json.dumps(header))  # as it reads back: lists, string keys
        self.machine = json.loads(json.dumps(machine_kind() if machine is None else machine))  # this one's kind
        self.seconds: dict[int, float] = {}  # the sampling seconds of each finished call whose line records them
        self.machines: dict[int, dict] = {}  # the kind of machine each timed call ran on, where its line says

    def load(self) -> dict[int, list[dict]]:
        """The calls finished before, by position, when the file records this same evaluation; else none (a
        file recorded for other samples is set aside). Leaves the file holding exactly what it returns."""
        if not self.path.is_file():
            self._write({})
            return {}
        lines = self.path.read_text().splitlines()
        try:
            recorded = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            recorded = None
        if recorded != self.header:
            log.warning(
                "%s was recorded for other samples; set aside as %s, sampling from the start", self.path, STALE_FILE
            )
            self.path.replace(self.path.with_name(STALE_FILE))
            self._write({})
            return {}
        done: dict[int, list[dict]] = {}
        for line in lines[1:]:
            try:
                row = json.loads(line)
                done[int(row["call"])] = row["problems"]
                if isinstance(row.get("seconds"), int | float):
                    self.seconds[int(row["call"])] = float(row["seconds"])
                if isinstance(row.get("machine"), dict):
                    self.machines[int(row["call"])] = row["machine"]
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("%s: dropping a call cut off mid-write", self.path)
        self._write(done)
        if done:
            log.info("%s: resuming, %d Sample calls already made", self.path, len(done))
        return done

    def record(self, call: int, problems: list[dict], seconds: float | None = None) -> None:
        """Append one finished call (and the seconds it took to sample here, where known), on disk before this
        returns."""
        if seconds is not None:
            self.seconds[call], self.machines[call] = seconds, self.machine
        with self.path.open("a") as handle:
            handle.write(json.dumps(self._row(call, problems)) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def call_fits(self, deadline: float | None, now: float) -> bool:
        """Whether one more call, as long as the longest so far (in any session), ends by `deadline` (a timestamp);
        with no call timed yet, one starts unless the deadline has passed (it tells how long calls take)."""
        return deadline is None or now + max(self.seconds.values(), default=0.0) <= deadline

    def timing(self, calls: int) -> dict:
        """How long the evaluation's `calls` Sample calls take on this kind of machine: the seconds of those timed
        here (calls recorded before times were kept, or made on another kind of machine, count as untimed) and
        their mean, from which a whole evaluation's time follows."""
        timed = [self.seconds[c] for c in range(calls) if c in self.seconds and self.machines.get(c) == self.machine]
        return {
            "calls": calls,
            "timed_calls": len(timed),
            "sampling_seconds": sum(timed),
            "seconds_per_call": sum(timed) / len(timed) if timed else None,
        }

    def finish(self) -> None:
        """The evaluation's results are written: the partial record has served."""
        self.path.unlink(missing_ok=True)

    def _write(self, done: dict[int, list[dict]]) -> None:
        lines = [json.dumps(self.header), *(json.dumps(self._row(c, done[c])) for c in sorted(done))]
        write_atomically(self.path, "".join(line + "\n" for line in lines), durable=True)

    def _row(self, call: int, problems: list[dict]) -> dict:
        row: dict = {"call": call, "problems": problems}
        if call in self.seconds:
            row["seconds"] = self.seconds[call]
        if call in self.machines:
            row["machine"] = self.machines[call]
        return row
