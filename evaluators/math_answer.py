"""MATH-style answers: the last `\\boxed{}` (brace-matched), checked for equivalence by `math-verify`.

`\\frac{1}{2}`, `0.5` and `1/2` are the same answer. math-verify's own timeout uses `signal.alarm`,
which works only in a process's main thread, while the inference server scores on a worker thread;
so verification runs with that timeout disabled inside a small process pool, and a call that
exceeds `timeout_seconds` scores 0.0 and the pool is replaced.

    >>> MathEvaluator().score_batch([ScoredSample("", "so \\\\boxed{\\\\frac12}", "0.5")])
    [1.0]
"""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from seedcast.evaluators.answers import last_boxed
from seedcast.evaluators.base import ScoredSample

MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."


def verify_answer(predicted: str, reference: str) -> float | None:
    """1.0 if math-verify finds `predicted` equivalent to `reference`; None if the reference does not parse."""
    from math_verify import parse, verify

    # The timeout is ours (the pool's), so math-verify's warning about disabling its own is noise.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    gold = parse(f"${reference}$", parsing_timeout=None)
    if not gold:
        gold = parse(reference, parsing_timeout=None)
    if not gold:
        return None
    answer = parse(f"${predicted}$", parsing_timeout=None)
    if not answer:
        return 0.0
    return 1.0 if verify(gold, answer, timeout_seconds=None) else 0.0


def _verify_all(pairs: list[tuple[str, str]]) -> list[float | None]:
    return [verify_answer(predicted, reference) for predicted, reference in pairs]


class MathEvaluator:
    """Boxed-answer equivalence via math-verify, with a process-safe timeout; no box scores 0.0."""

    def __init__(self, timeout_seconds: float = 10.0, workers: int = 1) -> None:
        self.timeout_seconds = timeout_seconds
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: forking a process that runs gRPC and torch threads is unsafe.
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def _reset_pool(self) -> None:
        if self._pool is not None:
            for process in list(getattr(self._pool, "_processes", {}).values()):
                process.kill()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _verify(self, pairs: list[tuple[str, str]], timeout: float) -> list[float | None] | None:
        try:
            return self._executor().submit(_verify_all, pairs).result(timeout=timeout)
        except FutureTimeout:
            self._reset_pool()
            return None

    def score_batch(self, samples: list[ScoredSample]) -> list[float | None]:
        """Score each sample; one pooled call for the batch, then one call per sample if it timed out."""
        rewards: list[float | None] = [0.0] * len(samples)
        boxes = [last_boxed(s.completion) for s in samples]
        pending = [
            (i, box, sample.reference)
            for i, (sample, box) in enumerate(zip(samples, boxes, strict=True))
            if box is not None
        ]
        if not pending:
            return rewards
        batch = self._verify([(box, ref) for _, box, ref in pending], self.timeout_seconds * len(pending))
        if batch is None:  # something hung: find which, one at a time
            batch = [
                (r[0] if (r := self._verify([(box, ref)], self.timeout_seconds)) else 0.0) for _, box, ref in pending
            ]
        for (index, _, _), reward in zip(pending, batch, strict=True):
            rewards[index] = reward
        return rewards

    def close(self) -> None:
        """Stop the worker processes."""
        self._reset_pool()
