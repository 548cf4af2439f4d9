"""Every random choice of a run, derived from (run seed, purpose, iteration, index).

Because nothing depends on call order, a resumed run draws exactly the seeds and minibatches an
uninterrupted run would have drawn at the same iteration: the seed stream continues, never restarts.
The hash is the shared `stable_seed` (proto/seeds.py), the one seed function of both processes.
"""

from __future__ import annotations

import random

from seedcast.proto.seeds import stable_seed


def derive_seed(run_seed: int, purpose: str, *indices: int) -> int:
    """A stable 63-bit seed for one purpose ("member", "sampling", "batch", ...) and indices."""
    return stable_seed(":".join(["seedcast", str(run_seed), purpose, *map(str, indices)]))


def minibatch_indices(run_seed: int, iteration: int, dataset_size: int, batch_size: int) -> list[int]:
    """The problem indices of an iteration's minibatch (without replacement)."""
    rng = random.Random(derive_seed(run_seed, "batch", iteration))
    return rng.sample(range(dataset_size), min(batch_size, dataset_size))
