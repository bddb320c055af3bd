# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the tokens of a run are worth: tools listed but never called, and money.

- **Unused-tool tax**, per side and server: the tools of the latest listing
  (`mcp_tokens.tool.definition` above 0), the ones with at least one `tools/call` response
  in the run, and the definition tokens of those never called, as a share of the listing.
  Every conversation pays the whole listing; the never-called share buys nothing.
- **Definition tokens per call**, per listed tool: its definition tokens over its calls (a
  tool in every listing and called once is expensive per call; never called is unbounded).
- **Cost**: MCP traffic reaches the model as input tokens (tool results and the tool
  definitions of every conversation), so a price per million input tokens turns tokens
  into money. Tool-call arguments are written by the model (output tokens) and not priced.

Names are matched as the metrics carry them: a call whose tool name was folded into
`_OTHER` cannot be matched to its definition and leaves that tool "never called", which is
why a listing's own tools always keep their names (telemetry.md, label values).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.exporter.mcp_tokens.textformat import money

from .rows import DefinitionRow, OperationRow

TOOLS_CALL = "tools/call"
MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """A price per million model input tokens, in `currency` (a code such as USD, or a symbol)."""

    per_mtok: float
    currency: str = "USD"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.per_mtok) and self.per_mtok >= 0):
            raise ValueError(
                f"a price per million tokens must be a finite number >= 0, got {self.per_mtok!r}"
            )

    def of(self, tokens: float) -> float:
        return tokens * self.per_mtok / MILLION

    def text(self, tokens: float) -> str:
        return money(self.of(tokens), self.currency)


@dataclass(frozen=True)
class ToolUse:
    """One listed tool: its definition tokens and how often it was called."""

    tool: str
    tokens: float
    calls: int

    @property
    def tokens_per_call(self) -> float | None:
        """Definition tokens per call; None when never called (the tax bought nothing)."""
        return self.tokens / self.calls if self.calls else None


@dataclass(frozen=True)
class UnusedTools:
    """The unused-tool tax of one side and server."""

    side: str
    server: str
    tools: tuple[ToolUse, ...]  # most definition tokens first

    @property
    def listed(self) -> int:
        return len(self.tools)

    @property
    def called(self) -> int:
        return sum(1 for tool in self.tools if tool.calls)

    @property
    def never_called(self) -> tuple[ToolUse, ...]:
        return tuple(tool for tool in self.tools if not tool.calls)

    @property
    def definition_tokens(self) -> float:
        return sum(tool.tokens for tool in self.tools)

    @property
    def never_called_tokens(self) -> float:
        return sum(tool.tokens for tool in self.never_called)

    @property
    def never_called_share(self) -> float:
        total = self.definition_tokens
        return self.never_called_tokens / total if total > 0 else 0.0

    def summary(self) -> str:
        """'8 of 12, 984 of 1,473 definition tokens (67%)'."""
        return (
            f"{len(self.never_called):,} of {self.listed:,}, {self.never_called_tokens:,.0f} of "
            f"{self.definition_tokens:,.0f} definition tokens ({self.never_called_share:.0%})"
        )


def unused_tools(
    rows: tuple[OperationRow, ...], definitions: tuple[DefinitionRow, ...]
) -> tuple[UnusedTools, ...]:
    """Per side and server of the latest listings, every listed tool with its calls in the run."""
    calls = tool_calls(rows)
    servers: dict[tuple[str, str], list[ToolUse]] = {}
    for d in definitions:
        use = ToolUse(d.tool, d.tokens, calls.get((d.side, d.server, d.tool), 0))
        servers.setdefault((d.side, d.server), []).append(use)
    return tuple(
        UnusedTools(side, server, tuple(sorted(tools, key=lambda t: (-t.tokens, t.tool))))
        for (side, server), tools in sorted(servers.items())
    )


def tool_calls(rows: tuple[OperationRow, ...]) -> Mapping[tuple[str, str, str], int]:
    """tools/call responses per (side, server, tool)."""
    found: dict[tuple[str, str, str], int] = {}
    for row in rows:
        if row.method == TOOLS_CALL and row.calls:
            key = (row.side, row.server, row.target)
            found[key] = found.get(key, 0) + row.calls
    return found


@dataclass(frozen=True)
class ServerCost:
    """What one side and server's traffic costs at a price (responses are what the model reads)."""

    side: str
    server: str
    response_tokens: float  # tools/call, resources/read and prompts/get responses
    definition_tokens: float  # the latest listing: paid once per conversation
    never_called_tokens: float


RESPONSE_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


def server_costs(rows: tuple[OperationRow, ...], unused: tuple[UnusedTools, ...]) -> tuple[ServerCost, ...]:
    responses: dict[tuple[str, str], float] = {}
    for row in rows:
        if row.method in RESPONSE_METHODS:
            responses[(row.side, row.server)] = (
                responses.get((row.side, row.server), 0.0) + row.response_tokens
            )
    listings = {(u.side, u.server): u for u in unused}
    return tuple(
        ServerCost(
            side,
            server,
            responses.get((side, server), 0.0),
            listings[(side, server)].definition_tokens if (side, server) in listings else 0.0,
            listings[(side, server)].never_called_tokens if (side, server) in listings else 0.0,
        )
        for side, server in sorted(set(responses) | set(listings))
    )
