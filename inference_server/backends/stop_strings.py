"""Stop strings, ended the same way on every backend: a completion ends where its text first contains one of
them, the string itself cut off (vLLM's default), and counts as finished, not truncated. transformers stops
generating a sequence at its stop string but keeps the string in the text; these helpers cut it and count the
tokens up to it, so both backends report the same text, token count and truncation."""

from __future__ import annotations

from collections.abc import Callable, Sequence


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """The text before the first stop string in it, and whether there was one."""
    found = [index for index in (text.find(stop) for stop in stops) if index >= 0]
    return (text[: min(found)], True) if found else (text, False)


def tokens_until_stop(tokens: Sequence[int], decode: Callable[[Sequence[int]], str], stops: Sequence[str]) -> int:
    """The fewest leading tokens whose text contains a stop string (the one that completes it included), found
    by bisection; len(tokens) when none does."""
    low, high = 0, len(tokens)
    while low < high:
        middle = (low + high) // 2
        if cut_at_stop(decode(tokens[: middle + 1]), stops)[1]:
            high = middle
        else:
            low = middle + 1
    return min(low + 1, len(tokens))
