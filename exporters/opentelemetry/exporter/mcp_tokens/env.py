# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Reading the exporters' `OTEL_EXPORTER_MCP_TOKENS_*` settings: a value that does not parse is
logged once and its default is used, so that a typo never stops the host process."""

from __future__ import annotations

import logging
from collections.abc import Mapping

_logger = logging.getLogger(__name__)


def integer_setting(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """`env[name]` as an integer in `low..high`; `default` when unset or not one (logged)."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        _logger.warning("%s=%r is not an integer in %d..%d; using %d", name, text, low, high, default)
        return default
    return value
