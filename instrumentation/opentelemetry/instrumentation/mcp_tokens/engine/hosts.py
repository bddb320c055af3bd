# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What each MCP host accepts: result and tool-count limits, as data, and the checks.

Hosts count and cap differently: Claude Code counts Claude tokens, Codex CLI and Copilot
CLI cut results by bytes and lines, VS Code, Cursor, Windsurf and the Gemini API cap how
many tools a request may carry. The numbers below are the hosts' defaults as public
sources give them (docs/telemetry.md, "Hosts", lists each source); hosts change them, so
they live here and nowhere else, and everything (the instrumentation's counter, the CLI's
`--host`, the report, `top`, the dashboards and alerts) reads them from here.

A limit is crossed by a value strictly over it. Every `limit` here is one past which the
host refuses, cuts, drops or moves something away from the model; `warn` levels are where
it only warns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Kinds of limit (the `mcp_tokens.host.limit` attribute's values).
TOKENS = "tokens"  # a result's tokens, in the host's encoding
BYTES = "bytes"  # a result's text, UTF-8 bytes
LINES = "lines"  # a result's text, lines
CHARS = "chars"  # a result's text, characters
TOOLS = "tools"  # tools a request carries (all servers' listings together)
RESULT_KINDS = (TOKENS, BYTES, LINES, CHARS)
KINDS = (*RESULT_KINDS, TOOLS)


@dataclass(frozen=True)
class Limit:
    kind: str
    value: int
    effect: str  # what the host does past it, in a few words ("refuses the result")


@dataclass(frozen=True)
class Host:
    name: str  # as `--host` and OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS spell it
    title: str
    # The encoding its token limits count in (None: it has none).
    encoding: str | None = None
    limits: tuple[Limit, ...] = ()
    # Levels where it warns without acting: (kind, value).
    warnings: tuple[tuple[str, int], ...] = ()

    def limit(self, kind: str) -> Limit | None:
        return next((limit for limit in self.limits if limit.kind == kind), None)

    @property
    def result_limits(self) -> tuple[Limit, ...]:
        return tuple(limit for limit in self.limits if limit.kind in RESULT_KINDS)

    @property
    def tool_limit(self) -> int | None:
        limit = self.limit(TOOLS)
        return None if limit is None else limit.value


HOSTS: dict[str, Host] = {
    host.name: host
    for host in (
        Host(
            "claude-code",
            "Claude Code",
            encoding="claude-4.7",
            # MAX_MCP_OUTPUT_TOKENS (default 25,000), counted in Claude tokens; it warns above
            # 10,000. Results over 50,000 characters are written to a file instead.
            limits=(
                Limit(TOKENS, 25_000, "cuts the result and says so"),
                Limit(CHARS, 50_000, "moves the result to a file"),
            ),
            warnings=((TOKENS, 10_000),),
        ),
        Host(
            "codex",
            "Codex CLI",
            limits=(
                Limit(BYTES, 10_240, "cuts the result"),
                Limit(LINES, 256, "cuts the result"),
            ),
        ),
        Host("copilot-cli", "Copilot CLI", limits=(Limit(BYTES, 10_240, "cuts the result"),)),
        Host(
            "vscode",
            "VS Code (Copilot)",
            limits=(Limit(TOOLS, 128, "refuses a request with more tools"),),
            warnings=((TOOLS, 64),),  # groups tools from 64 on
        ),
        # Earlier Cursor sent only the first 40 tools to the model.
        Host("cursor", "Cursor", limits=(Limit(TOOLS, 80, "warns and errors past it"),)),
        Host("windsurf", "Windsurf", limits=(Limit(TOOLS, 50, "takes the first 50 tools only"),)),
        Host("gemini", "Gemini API", limits=(Limit(TOOLS, 512, "refuses more function declarations"),)),
    )
}


def parse_hosts(names: Iterable[str]) -> tuple[str, ...]:
    """Known host names, in order, once each; ValueError names the first unknown one."""
    chosen: list[str] = []
    for raw in names:
        name = raw.strip().lower()
        if not name:
            continue
        if name not in HOSTS:
            raise ValueError(f"unknown host {raw.strip()!r}; expected one of {', '.join(HOSTS)}")
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)


@dataclass(frozen=True)
class ResultSize:
    """A result's text as hosts measure it: `tokens` per encoding (only those asked for)."""

    chars: int
    bytes: int
    lines: int
    tokens: dict[str, int]

    def value(self, kind: str, encoding: str | None) -> int | None:
        if kind == TOKENS:
            return None if encoding is None else self.tokens.get(encoding)
        return {CHARS: self.chars, BYTES: self.bytes, LINES: self.lines}.get(kind)


def text_size(texts: Sequence[str]) -> tuple[int, int, int]:
    """(characters, UTF-8 bytes, lines) of a result's texts (its text blocks in order: each
    block starts a line)."""
    chars = sum(map(len, texts))
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    lines = sum(t.count("\n") + 1 for t in texts if t)
    return chars, size, lines


def crossed_result_limits(host: Host, size: ResultSize) -> tuple[Limit, ...]:
    """The result limits of `host` that `size` is over (a token limit needs its count)."""
    crossed = []
    for limit in host.result_limits:
        value = size.value(limit.kind, host.encoding)
        if value is not None and value > limit.value:
            crossed.append(limit)
    return tuple(crossed)


def token_encodings(hosts: Iterable[str]) -> tuple[str, ...]:
    """The encodings the chosen hosts' token limits count in."""
    found: list[str] = []
    for name in hosts:
        encoding = HOSTS[name].encoding
        if encoding is not None and encoding not in found:
            found.append(encoding)
    return tuple(found)
