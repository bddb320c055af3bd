# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Structure overhead as docs/telemetry.md defines it, computed independently of the engine
for payloads small enough to be measured whole (no sampling): for each outermost array of at
least 4 objects sharing one set of at least 2 keys, the tokens of its compact JSON minus those
of its tabular form (a header row of the keys, then one row of values per record); a block
whose saving is under 5% of its tokens has none."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _tables(value: object) -> list[list[dict[str, Any]]]:
    if isinstance(value, dict):
        return [table for child in value.values() for table in _tables(child)]
    if isinstance(value, list):
        if len(value) >= 4 and isinstance(value[0], dict):
            keys = set(value[0])
            uniform = len(keys) >= 2 and all(isinstance(r, dict) and set(r) == keys for r in value)
            return [value] if uniform else []
        return [table for child in value for table in _tables(child)]
    return []


def structure_tokens(value: object, block_tokens: int, count: Callable[[str], int]) -> int:
    saving = 0
    for records in _tables(value):
        keys = list(records[0])
        rows = [keys, *([record[key] for key in keys] for record in records)]
        saving += max(0, count(_compact(records)) - count(_compact(rows)))
    return saving if saving >= 0.05 * block_tokens else 0
