# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The longest prefix of a text that fits a token budget, for any tokenizer that can count.

The guard cuts results to a limit. A tiktoken encoding can cut at its own token
boundaries (`TiktokenTokenizer.prefix`); a tokenizer that only counts (Claude's) is
searched instead: guess where the budget runs out from the counts so far (a secant step),
count that prefix exactly, keep the best prefix that fits, and stop once it fills the
budget closely. Only a prefix's own exact count is trusted, never an assumption that
counts grow with length, so whatever comes back fits.
"""

from __future__ import annotations

from collections.abc import Callable

# Stop once a fitting prefix holds this share of the budget: the guard's notice and its
# 90% floor leave room for it.
FILL = 0.98
ATTEMPTS = 24
# A cut moves back to the end of a whitespace run at most this far, so results are not
# cut mid-word when it costs nothing.
SNAP_CHARS = 64


def search_prefix(
    text: str,
    budget: int,
    count: Callable[[str], int],
    *,
    max_chars: int | None = None,
    chars_per_token: float = 3.0,
) -> tuple[int, int]:
    """(characters, tokens) of a prefix of `text` whose own count (`count`) is at most
    `budget`, as close to it as the search gets; (0, 0) when nothing fits.

    Only prefixes are counted, never the whole text: the first guess is `chars_per_token`
    characters per token of budget, and no prefix longer than `max_chars` is tried (the
    tokenizer's bound past which none can fit)."""
    if budget <= 0 or not text:
        return 0, 0
    limit = len(text) if max_chars is None else max(1, min(len(text), max_chars))
    low, low_tokens = 0, 0
    high, high_tokens = limit + 1, -1  # -1: no prefix over the budget seen yet
    cut = min(limit, max(1, int(budget * chars_per_token)))
    for _ in range(ATTEMPTS):
        cut = _snapped(text, cut, low)
        tokens = count(text[:cut])
        if tokens <= budget:
            low, low_tokens = cut, tokens
            if cut >= limit or tokens >= FILL * budget:
                break
        else:
            high, high_tokens = cut, tokens
        if high - low <= 1:
            break
        cut = _next_guess(budget, (low, low_tokens), (high, high_tokens), limit)
    return low, low_tokens


def _next_guess(budget: int, fitting: tuple[int, int], over: tuple[int, int], limit: int) -> int:
    """Where the budget runs out, from the fitting prefix and the prefix over it (secant),
    or from the fitting prefix's rate alone while nothing over it is known; each prefix
    is given as (chars, tokens)."""
    low, low_tokens = fitting
    high, high_tokens = over
    if high_tokens < 0:
        rate = low / max(1, low_tokens)
        return min(limit, max(low + 1, int(budget * rate)))
    share = (budget - low_tokens) / max(1, high_tokens - low_tokens)
    return min(max(low + int((high - low) * share), low + 1), high - 1)


def _snapped(text: str, cut: int, floor: int) -> int:
    """`cut` moved back to just after whitespace, when some lies within SNAP_CHARS."""
    start = max(floor + 1, cut - SNAP_CHARS)
    window = text[start:cut]
    for offset in range(len(window) - 1, -1, -1):
        if window[offset].isspace():
            return start + offset + 1
    return cut
