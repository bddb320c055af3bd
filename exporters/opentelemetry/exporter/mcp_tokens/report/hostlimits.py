# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What each chosen host would refuse, cut or drop, in the host's own unit.

Two sources, both from the metrics contract (docs/telemetry.md):

- `mcp_tokens.host.over_limit`: the responses the instrumentation found over a host's
  result limit (hosts chosen with OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS in the instrumented
  process), counted in that host's unit: Claude tokens for Claude Code, bytes and lines
  for Codex CLI, ...; exact counts of responses, per host, limit and operation;
- `mcp_tokens.tools`: each server's tool count in its latest listing, compared with the
  tool limit of every host chosen for the report (a gauge, so the count is exact however
  tool labels are folded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import HOSTS

from .series import Snapshot


@dataclass(frozen=True)
class OverLimitRow:
    """Responses of one operation over one host's limit."""

    host: str
    limit: str  # tokens, bytes, lines, chars
    side: str
    server: str
    method: str
    target: str
    responses: int

    @property
    def threshold(self) -> int | None:
        limit = HOSTS[self.host].limit(self.limit) if self.host in HOSTS else None
        return None if limit is None else limit.value


@dataclass(frozen=True)
class ToolCountRow:
    """A server whose latest listing holds more tools than a host takes."""

    host: str
    limit: int
    side: str
    server: str
    tools: int


@dataclass(frozen=True)
class HostLimits:
    hosts: tuple[str, ...]  # the hosts chosen for the tool-count check
    over: tuple[OverLimitRow, ...]  # most responses first
    tool_counts: tuple[ToolCountRow, ...]

    def summary(self) -> list[str]:
        """One line per host: what is over its limits, or that nothing is."""
        lines = []
        for host in dict.fromkeys([*self.hosts, *(r.host for r in self.over)]):
            parts = [*self._responses_over(host), *self._servers_over(host)]
            title = HOSTS[host].title if host in HOSTS else host
            lines.append(f"{title}: " + ("; ".join(parts) if parts else "nothing over its limits"))
        return lines

    def _responses_over(self, host: str) -> list[str]:
        by_limit: dict[str, int] = {}
        for row in self.over:
            if row.host == host:
                by_limit[row.limit] = by_limit.get(row.limit, 0) + row.responses
        parts = []
        for limit, responses in by_limit.items():
            noun = "response" if responses == 1 else "responses"
            threshold = HOSTS[host].limit(limit) if host in HOSTS else None
            bound = f"{threshold.value:,} {limit}" if threshold is not None else f"its {limit} limit"
            parts.append(f"{responses:,} {noun} over {bound}")
        return parts

    def _servers_over(self, host: str) -> list[str]:
        return [
            f"{count.server or '?'} lists {count.tools:,} tools (it takes {count.limit:,})"
            for count in self.tool_counts
            if count.host == host
        ]


def host_limits(snapshot: Snapshot, hosts: Sequence[str]) -> HostLimits | None:
    """The hosts section of a report (None when no host was chosen and none counted)."""
    over = _over_limit(snapshot)
    if not hosts and not over:
        return None
    return HostLimits(tuple(hosts), over, _tool_counts(snapshot, hosts))


def _over_limit(snapshot: Snapshot) -> tuple[OverLimitRow, ...]:
    rows: dict[tuple[str, str, str, str, str, str], float] = {}
    for attributes, value in snapshot.items(semconv.HOST_OVER_LIMIT):
        if not isinstance(value, float) or value <= 0:
            continue
        target = attributes.get(semconv.GEN_AI_TOOL_NAME) or attributes.get(semconv.GEN_AI_PROMPT_NAME) or ""
        key = (
            attributes.get(semconv.HOST, ""),
            attributes.get(semconv.HOST_LIMIT, ""),
            attributes.get(semconv.SIDE, ""),
            attributes.get(semconv.SERVER_NAME, ""),
            attributes.get(semconv.MCP_METHOD_NAME, ""),
            target,
        )
        rows[key] = rows.get(key, 0) + value
    found = [OverLimitRow(*key, round(value)) for key, value in rows.items()]
    return tuple(sorted(found, key=lambda r: (-r.responses, r.host, r.limit, r.side, r.server, r.target)))


def _tool_counts(snapshot: Snapshot, hosts: Sequence[str]) -> tuple[ToolCountRow, ...]:
    listed: dict[tuple[str, str], int] = {}
    for attributes, value in snapshot.items(semconv.TOOLS):
        if isinstance(value, float):
            key = (attributes.get(semconv.SIDE, ""), attributes.get(semconv.SERVER_NAME, ""))
            listed[key] = max(listed.get(key, 0), round(value))
    rows = []
    for host in hosts:
        limit = HOSTS[host].tool_limit if host in HOSTS else None
        if limit is None:
            continue
        for (side, server), tools in sorted(listed.items()):
            if tools > limit:
                rows.append(ToolCountRow(host, limit, side, server, tools))
    return tuple(rows)
