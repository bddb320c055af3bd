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


def search_prefix(text: str, budget: int, count: Callable[[str], int]) -> tuple[int, int]:
    """(characters, tokens) of a prefix of `text` whose own count (`count`) is at most
    `budget`, as close to it as the search gets; (0, 0) when nothing fits."""
    if budget <= 0 or not text:
        return 0, 0
    high, high_tokens = len(text), count(text)
    if high_tokens <= budget:
        return high, high_tokens
    low, low_tokens = 0, 0
    for _ in range(ATTEMPTS):
        if high - low <= 1:
            break
        share = (budget - low_tokens) / max(1, high_tokens - low_tokens)
        guess = low + int((high - low) * share)
        cut = _snapped(text, min(max(guess, low + 1), high - 1), low)
        tokens = count(text[:cut])
        if tokens <= budget:
            low, low_tokens = cut, tokens
            if tokens >= FILL * budget:
                break
        else:
            high, high_tokens = cut, tokens
    return low, low_tokens


def _snapped(text: str, cut: int, floor: int) -> int:
    """`cut` moved back to just after whitespace, when some lies within SNAP_CHARS."""
    start = max(floor + 1, cut - SNAP_CHARS)
    window = text[start:cut]
    for offset in range(len(window) - 1, -1, -1):
        if window[offset].isspace():
            return start + offset + 1
    return cut
