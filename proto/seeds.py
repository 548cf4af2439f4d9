"""The one seed hash of Seedcast, shared by both processes.

The optimizer derives every seed of a run from it (members, sampling, minibatches:
`optimizer/es/seeds.py`), and the servers derive each tensor's noise seed from it
(`inference_server/noise/`), so it lives here, in the contract both sides import. Per-tensor seeds
hash the member seed with the Hugging Face parameter name, so two tensors of the same shape never
share noise, and a backend that fuses tensors (vLLM's `qkv_proj`) rebuilds each piece by its HF name.
"""

from __future__ import annotations

import hashlib

SEED_BITS = 63  # seeds fit a signed 64-bit integer (torch generators, protobuf int64)
_SEED_MASK = (1 << SEED_BITS) - 1


def stable_seed(key: str) -> int:
    """A 63-bit seed that is a pure function of `key` (blake2b), the same in every process and machine."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little") & _SEED_MASK


def tensor_seed(seed: int, name: str) -> int:
    """The generator seed for one tensor: a stable 63-bit hash of the member seed and the HF name."""
    return stable_seed(f"{seed}:{name}")
