# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Host limits on the dashboards and in the alerts: responses over a host's result limit, and
servers listing more tools than a host takes.

The limits come from the instrumentation's one table (engine/hosts.py):

- **Responses over a host's limit**: `mcp_tokens_host_over_limit_total`, counted by the
  instrumentation in each chosen host's own unit (Claude tokens for Claude Code, bytes and
  lines for Codex CLI...), per host, limit kind and tool;
- **Servers over a host's tool limit**: `mcp_tokens_tools` (each server's tool count in its
  latest listing; a gauge, exact whatever tool labels fold into `_OTHER`) above the tool
  limit of each host the generator was given (`--host`, default every host with one); each
  answer carries the host and its limit as labels.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.instrumentation.mcp_tokens.engine.hosts import HOSTS

from . import names
from .dashboard_common import JOB, SERVER, SIDE
from .model import Panel, Step, Target
from .promql import RANGE, RATE_INTERVAL, events, series
from .settings import GeneratorSettings

HOST_LIMIT_PANEL = "Responses over a host's limit"
TOOL_LIMIT_PANEL = "Servers over a host's tool limit"
HOST_TOOL_LIMIT = "mcp_tokens_host_tool_limit"  # the label a tool-limit answer carries
OVER_LIMIT_LABELS = (names.JOB, names.SIDE, names.SERVER, names.TOOL, names.HOST, names.HOST_LIMIT)
SERVER_LABELS = (names.JOB, names.SIDE, names.SERVER)


def over_host_limit(window: str, matchers: Sequence[str] = ()) -> str:
    """Responses over a host's result limit in `window`, per tool, host and limit kind."""
    return events(names.HOST_OVER_LIMIT_TOTAL, matchers, OVER_LIMIT_LABELS, window)


def tool_limits(settings: GeneratorSettings) -> tuple[tuple[str, int], ...]:
    """(host, tool limit) of the hosts the generator was given that have one."""
    found = []
    for name in settings.hosts:
        limit = HOSTS[name].tool_limit
        if limit is not None:
            found.append((name, limit))
    return tuple(found)


def servers_over_tool_limits(settings: GeneratorSettings, matchers: Sequence[str] = ()) -> str:
    """Each server's tool count where it is over a chosen host's tool limit, labelled with the
    host and the limit (replicas of a server count once)."""
    tools = f"max by ({', '.join(SERVER_LABELS)}) ({series(names.TOOLS, matchers)})"
    parts = [
        f'label_replace(label_replace({tools} > {limit}, "{names.HOST}", "{host}", "", ""), '
        f'"{HOST_TOOL_LIMIT}", "{limit}", "", "")'
        for host, limit in tool_limits(settings)
    ]
    return " or ".join(parts) if parts else f"{tools} < 0"


def host_limit_panels(
    settings: GeneratorSettings, scope: Sequence[str] = (JOB, SIDE, SERVER)
) -> tuple[Panel, ...]:
    limits = ", ".join(f"{host} {limit}" for host, limit in tool_limits(settings)) or "none"
    return (
        Panel(
            title=HOST_LIMIT_PANEL,
            description=(
                "Tool responses over a host's result limit in the selected time range, counted by the "
                "instrumentation in that host's own unit (Claude tokens for claude-code, bytes and lines "
                "for codex...) for the hosts it was given (OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS). Those "
                "hosts cut, refuse or move such results away from the model (McpToolResponsesOverHostLimit)."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    over_host_limit(RANGE, scope),
                    legend="{{mcp_tokens_host}} {{mcp_tokens_host_limit}}: {{gen_ai_tool_name}} "
                    "({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=12,
            steps=(Step(None, "green"), Step(1, "red")),
        ),
        Panel(
            title="Responses over a host's limit per interval",
            description=(
                "Responses over a host's limit per interval: when they started and whether they keep "
                "coming. A steady line means every such call is cut on that host."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    over_host_limit(RATE_INTERVAL, scope),
                    legend="{{mcp_tokens_host}} {{mcp_tokens_host_limit}}: {{gen_ai_tool_name}} "
                    "({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                ),
            ),
            width=12,
        ),
        Panel(
            title=TOOL_LIMIT_PANEL,
            description=(
                f"Servers whose latest listing holds more tools than a host takes (tool limits: {limits}). "
                "A host counts the tools of every server an agent connects, so a server close to the "
                "limit on its own leaves no room for others (McpServerToolsOverHostLimit)."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    servers_over_tool_limits(settings, scope),
                    legend="{{mcp_tokens_host}} (takes {{mcp_tokens_host_tool_limit}}): "
                    "{{mcp_tokens_server_name}} ({{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=12,
            steps=(Step(None, "red"),),
        ),
        Panel(
            title="Tools per server",
            description=(
                "Each server's tool count in its latest listing (mcp_tokens_tools): compare it with the "
                "tool limits of the hosts your agents use, counting every server they connect."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"max by ({', '.join(SERVER_LABELS)}) ({series(names.TOOLS, scope)})",
                    legend="{{mcp_tokens_server_name}} ({{mcp_tokens_side}}, {{job}})",
                    instant=True,
                ),
            ),
            width=12,
        ),
    )
