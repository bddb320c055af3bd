# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How numbers, shares, money and untrusted names read in every human-facing output.

One module for the CLI (`profile`, `diff`, `top`) and the report exporter (terminal, text,
Markdown, HTML), so the two never word the same figure differently and neither imports the
other's private helpers. Names and messages come from peers: `printable`, `markdown_text`
and `markdown_code` make them inert for a terminal and for Markdown.
"""

from __future__ import annotations

import math
import re

# C0 and C1 control characters and DEL: a server's names and messages could otherwise move the
# cursor, retitle or clear the user's terminal (rich strips only a few of them).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# Characters that could turn untrusted text into a link, an image (fetched when the comment is
# viewed), HTML, a code span or a new table cell. Emphasis characters are left alone: at worst
# they style text, and escaping them would make every snake_case name unreadable in the source.
_MARKUP = re.compile(r"([\\`\[\]<>|])")

DASH = "—"


def printable(text: str) -> str:
    """`text` with every control character shown as an escape (\\x1b), never interpreted."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def markdown_text(text: str) -> str:
    """Untrusted text (names, paths, messages) as inert Markdown, on one line."""
    return _MARKUP.sub(r"\\\1", printable(" ".join(text.splitlines())))


def markdown_code(text: str) -> str:
    """Untrusted text as a code span, fenced by more backticks than it contains in a row."""
    flat = printable(" ".join(text.splitlines())).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}"


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def number(value: float | None, digits: int = 0) -> str:
    """1,473; a dash for unknown; +Inf for a bucket bound without limit."""
    if value is None or math.isnan(value):
        return DASH
    if math.isinf(value):
        return "+Inf"
    return f"{value:,.{digits}f}"


def approx(value: float | None) -> str:
    return DASH if value is None else "≈" + number(value)


def percent(value: float | None) -> str:
    """A share with one decimal: 66.8%."""
    if value is None or math.isnan(value):
        return DASH
    return "+Inf" if math.isinf(value) else f"{value:.1%}"


def window_share(value: float) -> str:
    """A share of the context window: two significant decimals for small shares."""
    return f"{value:.2%}" if value < 0.1 else f"{value:.1%}"


def seconds(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.2f} s"


def money(amount: float | None, currency: str) -> str:
    """An amount in `currency` (an ISO 4217 code or a symbol), precise enough for fractions of a
    cent: 0.0123 USD, 4.56 USD, 1,234.50 USD."""
    if amount is None or not math.isfinite(amount):
        return DASH
    if amount == 0 or abs(amount) >= 1:
        text = f"{amount:,.2f}"
    else:
        # Three significant digits below one unit: a tool's cost per call is often a tiny fraction.
        text = f"{amount:.{max(2, 2 - math.floor(math.log10(abs(amount))))}f}"
    return f"{text} {currency}" if currency else text
