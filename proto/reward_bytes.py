"""One byte per prompt reward on the wire (MemberResult.prompt_rewards_q8).

Per-prompt fitness normalisation needs every member's reward on every prompt; as float32 with its
tokens that is about 7 bytes a prompt, so a result for 256 prompts would not fit the 512 bytes a
member's result may take. Rewards are in [0, 1]: one byte holds round(r × 254) (a resolution of
1/254, exact for the k/2 rewards of 1- and 2-sample prompts) and 255 marks a prompt with no
scorable sample. Both sides use these two functions, so the encoding is written once.

    >>> decode_rewards(encode_rewards([0.0, 0.5, 1.0, float("nan")]))
    [0.0, 0.5, 1.0, nan]
"""

from __future__ import annotations

import math

SCALE = 254
NOT_SCORABLE = 255


def encode_rewards(rewards: list[float]) -> bytes:
    """Rewards in [0, 1] (NaN: not scorable) as one byte each; values outside [0, 1] are clipped."""
    return bytes(NOT_SCORABLE if math.isnan(r) else round(min(1.0, max(0.0, r)) * SCALE) for r in rewards)


def decode_rewards(data: bytes) -> list[float]:
    """The rewards `encode_rewards` wrote (to its resolution), NaN for not scorable."""
    return [math.nan if byte == NOT_SCORABLE else byte / SCALE for byte in data]
