# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""JSON that arrives as text (a text block, a resource): a cheap look at its ends, and a parse
that never raises. engine/overhead.py and engine/structure.py both read text blocks this way."""

from __future__ import annotations

import json

# How many characters of each end `looks_like_json` reads.
_END_CHARS = 64


class _NotJson:
    pass


# What `parse_json` returns for a text that does not parse (None is a JSON value: null).
NOT_JSON: object = _NotJson()


def looks_like_json(text: str) -> bool:
    """Whether `text` starts with `{` or `[` and ends with `}` or `]`, whitespace aside. Reads
    only the ends, so it costs nothing on a 20 MB text; it decides whether parsing is tried."""
    head = text[:_END_CHARS].lstrip()
    tail = text[-_END_CHARS:].rstrip()
    return bool(head) and head[0] in "{[" and tail[-1:] in "}]"


def parse_json(text: str) -> object:
    """The value `text` encodes, or NOT_JSON (also for a document nested too deep to parse)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return NOT_JSON
