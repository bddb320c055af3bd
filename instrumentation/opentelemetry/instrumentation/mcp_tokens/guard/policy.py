# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the guard enforces: the modes, each tool's limit, and the notice the model reads."""

from __future__ import annotations

import logging
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.config import (
    GUARD_BUDGET_MODES,
    GUARD_MODES,
    GUARD_OFF,
    GUARD_REJECT,
    GUARD_TRUNCATE,
    Settings,
)

_logger = logging.getLogger(__name__)

NOTICE_FIELDS = ("tool", "original_tokens", "delivered_tokens", "limit")

_ASK_FOR_LESS = "a narrower query, one page at a time (offset/limit or a cursor), or a smaller page size"
# The default notices, by action and reason; OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_NOTICE
# replaces them all.
_CUT = (
    "[mcp-tokens cut this result: {tool} returned {original_tokens} tokens, over {why}; "
    "only its first part is above ({delivered_tokens} tokens with this notice). "
    f"To get the rest, ask for less at a time: {_ASK_FOR_LESS}.]"
)
_REFUSED = (
    "[mcp-tokens refused this result: {tool} returned {original_tokens} tokens, over {why}. "
    f"Call it again asking for less: {_ASK_FOR_LESS}.]"
)
_WHY = {
    semconv.GUARD_REASON_RESULT_LIMIT: "the limit of {limit} tokens per result",
    semconv.GUARD_REASON_BUDGET: "the {limit} tokens left in this conversation's context window",
}
_REPEATED = (
    "[mcp-tokens withheld this result: {tool} was called with the same arguments more than "
    "{repeats} times within {window} seconds. The earlier results still stand: use them, or "
    "change the arguments.]"
)


@dataclass(frozen=True)
class Policy:
    mode: str
    budget_mode: str
    max_result_tokens: int
    tool_limits: Mapping[str, int]
    repeat_limit: int
    repeat_window_s: float
    notice: str | None

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        return cls(
            mode=_valid(settings.guard, GUARD_MODES, "guard"),
            budget_mode=_valid(settings.guard_budget, GUARD_BUDGET_MODES, "guard_budget"),
            max_result_tokens=_count(
                settings.guard_max_result_tokens, semconv.HOST_RESULT_CAP, "guard_max_result_tokens"
            ),
            tool_limits=_tool_limits(settings.guard_tool_limits),
            repeat_limit=_count(settings.guard_repeat_limit, 0, "guard_repeat_limit", least=0),
            repeat_window_s=_seconds(settings.guard_repeat_window, 60.0, "guard_repeat_window"),
            notice=_template(settings.guard_notice),
        )

    def limit_of(self, tool: str | None) -> int | None:
        """The token limit of one result of `tool` (None: unlimited)."""
        limit = self.tool_limits.get(tool, self.max_result_tokens) if tool else self.max_result_tokens
        return limit or None

    @property
    def repeats_apply(self) -> bool:
        return self.repeat_limit > 0 and self.mode != GUARD_OFF

    def notice_template(self, action: str, reason: str) -> str:
        if self.notice is not None:
            return self.notice
        if reason == semconv.GUARD_REASON_REPEAT:
            return _REPEATED.format(
                tool="{tool}", repeats=self.repeat_limit, window=f"{self.repeat_window_s:g}"
            )
        base = _REFUSED if action == GUARD_REJECT else _CUT
        return base.replace("{why}", _WHY[reason])


def render(template: str, *, tool: str, original: str, delivered: int, limit: int) -> str:
    """The notice text; placeholders other than the four documented ones stay as written."""
    values = {
        "tool": tool,
        "original_tokens": original,
        "delivered_tokens": f"{delivered:,}",
        "limit": f"{limit:,}",
    }
    return string.Formatter().vformat(template, (), _Verbatim(values))


class _Verbatim(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _template(value: str | None) -> str | None:
    if not value:
        return None
    try:
        render(value, tool="t", original="1", delivered=1, limit=1)
    except (ValueError, IndexError, AttributeError) as exc:
        _logger.warning("mcp-tokens: ignoring the guard notice %r (%s); using the default", value, exc)
        return None
    return value


def _valid(value: object, choices: tuple[str, ...], name: str) -> str:
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    _logger.warning("mcp-tokens: ignoring %s=%r (one of %s); using off", name, value, ", ".join(choices))
    return GUARD_OFF


def _count(value: object, default: int, name: str, *, least: int = 1) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= least:
        return value
    _logger.warning("mcp-tokens: ignoring %s=%r; using %s", name, value, default)
    return default


def _seconds(value: object, default: float, name: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    _logger.warning("mcp-tokens: ignoring %s=%r; using %s", name, value, default)
    return default


def _tool_limits(value: object) -> dict[str, int]:
    pairs: Any = value.items() if isinstance(value, Mapping) else value
    limits: dict[str, int] = {}
    try:
        for tool, limit in pairs:
            if isinstance(tool, str) and isinstance(limit, int) and limit >= 0:
                limits[tool] = limit
    except (TypeError, ValueError):
        _logger.warning("mcp-tokens: ignoring guard_tool_limits=%r (name=tokens,...)", value)
    return limits


__all__ = ["GUARD_REJECT", "GUARD_TRUNCATE", "NOTICE_FIELDS", "Policy", "render"]
