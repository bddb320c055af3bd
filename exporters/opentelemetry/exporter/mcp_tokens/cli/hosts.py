# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`--host NAME`: would a host refuse, cut or drop anything of this server?

Each chosen host's limits (engine/hosts.py) are checked against what the profile saw: the
tool count of the listing against its tool limit (the tools past it are the ones a host
that takes the first N never offers), and a measured `--call`'s result against its result
limits, in the host's own unit (Claude tokens for Claude Code, bytes and lines for Codex).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind, payload_texts
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import (
    HOSTS,
    TOOLS,
    Host,
    ResultSize,
    crossed_result_limits,
    text_size,
)
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenCounter


@dataclass(frozen=True)
class Crossed:
    """One limit of a host that the server crosses."""

    kind: str
    limit: int
    value: int
    effect: str
    tools: tuple[str, ...]  # the tools concerned
    exact: bool = True  # whether `value` was counted exactly (token limits)


@dataclass(frozen=True)
class HostCheck:
    host: Host
    crossed: tuple[Crossed, ...]
    warnings: tuple[Crossed, ...] = ()

    @property
    def exceeded(self) -> bool:
        return bool(self.crossed)


Counters = Callable[[str], TokenCounter]  # encoding -> a counter in it


def check_hosts(
    names: Sequence[str],
    tools: Sequence[str],
    call: tuple[str, Mapping[str, Any]] | None,
    counter_for: Counters,
) -> tuple[HostCheck, ...]:
    """The chosen hosts' verdicts on a listing (`tools`, in listing order) and an optional
    measured call (tool name, wire result)."""
    return tuple(_check(HOSTS[name], tools, call, counter_for) for name in names)


def _check(
    host: Host,
    tools: Sequence[str],
    call: tuple[str, Mapping[str, Any]] | None,
    counter_for: Counters,
) -> HostCheck:
    crossed: list[Crossed] = []
    warnings: list[Crossed] = []
    tool_limit = host.limit(TOOLS)
    if tool_limit is not None and len(tools) > tool_limit.value:
        crossed.append(
            Crossed(TOOLS, tool_limit.value, len(tools), tool_limit.effect, tuple(tools[tool_limit.value :]))
        )
    for kind, level in host.warnings:
        if kind == TOOLS and len(tools) > level and (tool_limit is None or len(tools) <= tool_limit.value):
            warnings.append(Crossed(TOOLS, level, len(tools), "warns", ()))
    if call is not None and host.result_limits:
        crossed.extend(_result_limits(host, call, counter_for))
    return HostCheck(host, tuple(crossed), tuple(warnings))


def _result_limits(host: Host, call: tuple[str, Mapping[str, Any]], counter_for: Counters) -> list[Crossed]:
    name, result = call
    texts = payload_texts(PayloadKind.TOOL_RESULT, result)
    chars, size, lines = text_size(texts)
    tokens: dict[str, int] = {}
    exact = True
    if host.encoding is not None:
        counter = counter_for(host.encoding)
        counted = [counter.count(text) for text in texts]
        tokens[host.encoding] = sum(c.tokens for c in counted)
        exact = all(c.exact for c in counted)
    measured = ResultSize(chars, size, lines, tokens)
    return [
        Crossed(
            limit.kind,
            limit.value,
            measured.value(limit.kind, host.encoding) or 0,
            limit.effect,
            (name,),
            exact if limit.kind == "tokens" else True,
        )
        for limit in crossed_result_limits(host, measured)
    ]


def host_document(check: HostCheck) -> dict[str, Any]:
    """One entry of the profile's `hosts` (JSON)."""
    return {
        "host": check.host.name,
        "title": check.host.title,
        "exceeded": check.exceeded,
        "encoding": check.host.encoding,
        "limits": [_crossed_document(c) for c in check.crossed],
        "warnings": [_crossed_document(c) for c in check.warnings],
    }


def _crossed_document(crossed: Crossed) -> dict[str, Any]:
    return {
        "kind": crossed.kind,
        "limit": crossed.limit,
        "value": crossed.value,
        "effect": crossed.effect,
        "tools": list(crossed.tools),
        "exact": crossed.exact,
    }


def host_lines(checks: Sequence[HostCheck], shown: int = 3) -> list[str]:
    """One line per chosen host, for the table and Markdown outputs."""
    lines = []
    for check in checks:
        if not check.crossed:
            lines.append(f"{check.host.title}: within its limits")
            continue
        parts = []
        for c in check.crossed:
            more = len(c.tools) - shown
            names = ", ".join(c.tools[:shown]) + (f" and {more} more" if more > 0 else "")
            parts.append(f"{c.value:,} {c.kind}, over its limit of {c.limit:,} ({c.effect}: {names})")
        lines.append(f"{check.host.title}: " + "; ".join(parts))
    return lines
