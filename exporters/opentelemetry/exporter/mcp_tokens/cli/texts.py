# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How numbers and states read in the terminal table and in Markdown (one wording for both)."""

from __future__ import annotations

from opentelemetry.exporter.mcp_tokens.textformat import plural, window_share
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskTier

from .profile import CallProfile, ServerProfile, ToolProfile
from .static import Bound


def tokens(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def worst_case(tool: ToolProfile) -> str:
    """The worst case as a table cell: '≥' marks an unbounded tool's figure at the assumed sizes."""
    value = tool.output.worst_case_tokens
    if value is None:
        return "—"
    return f"≥{value:,}" if tool.output.bound is Bound.UNBOUNDED else f"{value:,}"


def risk(tier: RiskTier | None) -> str:
    return "unknown" if tier is None else tier.value


def server_title(profile: ServerProfile) -> str:
    info = profile.info
    name = info.name or profile.target
    return f"{name} {info.version}" if info.version else name


def summary(profile: ServerProfile) -> str:
    """The totals: tax line and risk line, joined for one-line views."""
    return f"{tax_summary(profile)} · {risk_summary(profile)}"


def tax_summary(profile: ServerProfile) -> str:
    window = profile.settings.context_window
    return (
        f"{plural(len(profile.tools), 'tool')} · {profile.definition_tokens:,} definition tokens "
        f"({window_share(profile.definition_share)} of a {window:,}-token window)"
    )


def risk_summary(profile: ServerProfile) -> str:
    unbounded = len(profile.tools_with(Bound.UNBOUNDED))
    unknown = len(profile.tools_with(Bound.UNKNOWN))
    return f"overall risk {risk(profile.overall_risk)} · {unbounded} unbounded · {unknown} unknown-bound"


def diff_sides(old_source: str, new_source: str) -> str:
    return f"{old_source} → {new_source}"


def diff_totals(old_tokens: int, new_tokens: int, old_tools: int, new_tools: int) -> str:
    change = (
        f" ({(new_tokens - old_tokens) / old_tokens:+.1%})" if old_tokens and new_tokens != old_tokens else ""
    )
    tools = f"{old_tools} → {plural(new_tools, 'tool')}"
    return f"definition tax {old_tokens:,} → {new_tokens:,} tokens{change} · {tools}"


def connection(profile: ServerProfile) -> str:
    protocol = profile.info.protocol_version or "unknown protocol"
    return f"{profile.target} · protocol {protocol} · {profile.client} · {profile.settings.encoding}"


def output_fields(tool: ToolProfile, limit: int = 6) -> str:
    """The largest top-level output fields with their worst-case tokens, e.g. 'items 3,124 · cursor 69'."""
    fields = sorted(tool.output.fields, key=lambda f: -f.tokens)
    shown = [f"{f.name} {'≥' if not f.bounded else ''}{f.tokens:,}" for f in fields[:limit]]
    if len(fields) > limit:
        shown.append(f"+{len(fields) - limit} more")
    return " · ".join(shown)


def call_lines(call: CallProfile) -> list[str]:
    """What the engine measured on a real response, one fact per line."""
    analysis = call.analysis
    error = ", an error result (isError)" if call.is_error else ""
    overhead = ", ".join(f"{kind.value} {tokens:,}" for kind, tokens in analysis.overhead) or "none"
    lines = [
        f"response: {analysis.tokens:,} tokens ({analysis.risk.value}) in {analysis.block_count} "
        f"block(s){error}",
        f"overhead: {overhead} ({analysis.overhead_ratio:.1%} of the response)",
    ]
    for finding in analysis.padding:
        detail = f": {finding.detail}" if finding.detail else ""
        lines.append(
            f"padding: {finding.reason.value} in block {finding.block} at offset {finding.offset} "
            f"(score {finding.score:.2f}){detail}"
        )
    if not analysis.padding:
        lines.append("padding: none found")
    return lines
