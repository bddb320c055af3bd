# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Profiles and diffs as GitHub-flavoured Markdown (`--format markdown`), e.g. for PR comments."""

from __future__ import annotations

from opentelemetry.exporter.mcp_tokens.textformat import markdown_code, markdown_text, window_share

from . import texts
from .diff import DiffResult
from .hosts import host_lines
from .profile import ServerProfile
from .rules import Recommendation
from .static import Bound


def profile_markdown(profile: ServerProfile) -> str:
    lines = [
        f"## mcp-tokens profile: {markdown_text(texts.server_title(profile))}",
        "",
        texts.summary(profile),
        "",
        f"<sub>{markdown_text(texts.connection(profile))}</sub>",
        "",
        "| Tool | Definition tokens | Window | Worst case | Bound | Risk |",
        "|---|---:|---:|---:|---|---|",
    ]
    window = profile.settings.context_window
    for tool in profile.tools:
        share = window_share(tool.definition.tokens / window)
        lines.append(
            f"| {markdown_code(tool.name)} | {tool.definition.tokens:,} | {share} | {texts.worst_case(tool)} "
            f"| {tool.output.bound.value} | {texts.risk(tool.risk)} |"
        )
    lines.extend(_output_fields(profile))
    lines.extend(_calls(profile))
    if profile.hosts:
        hosts = [f"- {markdown_text(line)}" for line in host_lines(profile.hosts)]
        lines.extend(["", "**Hosts**", "", *hosts])
    lines.extend(_recommendations(profile.grouped_recommendations()))
    return "\n".join(lines) + "\n"


def _output_fields(profile: ServerProfile) -> list[str]:
    rows = [
        f"- {markdown_code(tool.name)}: {markdown_text(texts.output_fields(tool))}"
        for tool in profile.tools
        if tool.output.bound is not Bound.UNKNOWN and tool.output.fields
    ]
    return ["", "### Worst-case tokens per output field", "", *rows] if rows else []


def _calls(profile: ServerProfile) -> list[str]:
    lines: list[str] = []
    for tool in profile.tools:
        if tool.call is not None:
            facts = [f"- {markdown_text(line)}" for line in texts.call_lines(tool.call)]
            lines.extend(["", f"### Measured call: {markdown_code(tool.name)}", "", *facts])
    return lines


def _recommendations(recommendations: list[tuple[Recommendation, list[str]]]) -> list[str]:
    if not recommendations:
        return ["", "No recommendations."]
    lines = ["", "### Recommendations", ""]
    for r, tools in recommendations:
        where = ", ".join(markdown_code(tool) for tool in tools) + ": " if tools else ""
        lines.append(f"- **{r.severity.value}** {where}{markdown_text(r.message)} <sub>({r.rule})</sub>")
    return lines


def diff_markdown(result: DiffResult) -> str:
    worst = result.worst.value.upper() if result.worst is not None else "NO CHANGES"
    old, new = result.old, result.new
    totals = texts.diff_totals(old.definition_tokens, new.definition_tokens, len(old.tools), len(new.tools))
    lines = [
        f"## mcp-tokens diff: {worst}",
        "",
        f"{markdown_code(old.source)} → {markdown_code(new.source)}",
        "",
        totals,
        "",
    ]
    if not result.changes:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    lines.extend(["| Class | Tool | Change |", "|---|---|---|"])
    for change in result.changes:
        tool = markdown_code(change.tool) if change.tool else "(server)"
        lines.append(f"| {change.change_class.value.upper()} | {tool} | {markdown_text(change.message)} |")
    return "\n".join(lines) + "\n"
