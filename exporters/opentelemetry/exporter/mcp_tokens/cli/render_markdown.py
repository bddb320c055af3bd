"""Profiles and diffs as GitHub-flavoured Markdown (`--format markdown`), e.g. for PR comments."""

from __future__ import annotations

from . import texts
from .diff import DiffResult
from .profile import CallProfile, ServerProfile
from .rules import Recommendation
from .static import Bound


def profile_markdown(profile: ServerProfile) -> str:
    lines = [
        f"## mcp-tokens profile: {_escape(texts.server_title(profile))}",
        "",
        texts.summary(profile),
        "",
        f"<sub>{_escape(texts.connection(profile))}</sub>",
        "",
        "| Tool | Definition tokens | Window | Worst case | Bound | Risk |",
        "|---|---:|---:|---:|---|---|",
    ]
    window = profile.settings.context_window
    for tool in profile.tools:
        share = texts.share(tool.definition.tokens / window)
        lines.append(
            f"| `{_escape(tool.name)}` | {tool.definition.tokens:,} | {share} | {texts.worst_case(tool)} "
            f"| {tool.output.bound.value} | {texts.risk(tool.risk)} |"
        )
    lines.extend(_output_fields(profile))
    lines.extend(_calls(profile))
    lines.extend(_recommendations(profile.grouped_recommendations()))
    return "\n".join(lines) + "\n"


def _output_fields(profile: ServerProfile) -> list[str]:
    rows = [
        f"- `{_escape(tool.name)}`: {_escape(texts.output_fields(tool))}"
        for tool in profile.tools
        if tool.output.bound is not Bound.UNKNOWN and tool.output.fields
    ]
    return ["", "### Worst-case tokens per output field", "", *rows] if rows else []


def _calls(profile: ServerProfile) -> list[str]:
    lines: list[str] = []
    for tool in profile.tools:
        if tool.call is not None:
            lines.extend(["", f"### Measured call: `{_escape(tool.name)}`", "", *call_lines(tool.call)])
    return lines


def call_lines(call: CallProfile) -> list[str]:
    analysis = call.analysis
    overhead = ", ".join(f"{kind.value} {tokens:,}" for kind, tokens in analysis.overhead) or "none"
    error = ", an error result (isError)" if call.is_error else ""
    lines = [
        f"- response: **{analysis.tokens:,} tokens** ({analysis.risk.value}) in {analysis.block_count} "
        f"block(s){error}",
        f"- overhead: {overhead} ({analysis.overhead_ratio:.1%} of the response)",
    ]
    if analysis.padding:
        for finding in analysis.padding:
            detail = f": {finding.detail}" if finding.detail else ""
            lines.append(
                f"- padding: {finding.reason.value} in block {finding.block} at offset {finding.offset} "
                f"(score {finding.score:.2f}){_escape(detail)}"
            )
    else:
        lines.append("- padding: none found")
    return lines


def _recommendations(recommendations: list[tuple[Recommendation, list[str]]]) -> list[str]:
    if not recommendations:
        return ["", "No recommendations."]
    lines = ["", "### Recommendations", ""]
    for r, tools in recommendations:
        where = ", ".join(f"`{_escape(tool)}`" for tool in tools) + ": " if tools else ""
        lines.append(f"- **{r.severity.value}** {where}{_escape(r.message)} <sub>({r.rule})</sub>")
    return lines


def diff_markdown(result: DiffResult) -> str:
    worst = result.worst.value.upper() if result.worst is not None else "NO CHANGES"
    old, new = result.old, result.new
    totals = texts.diff_totals(old.definition_tokens, new.definition_tokens, len(old.tools), len(new.tools))
    lines = [
        f"## mcp-tokens diff: {worst}",
        "",
        f"`{_escape(old.source)}` → `{_escape(new.source)}`",
        "",
        totals,
        "",
    ]
    if not result.changes:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    lines.extend(["| Class | Tool | Change |", "|---|---|---|"])
    for change in result.changes:
        tool = f"`{_escape(change.tool)}`" if change.tool else "(server)"
        lines.append(f"| {change.change_class.value.upper()} | {tool} | {_escape(change.message)} |")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    """Neutralise the characters that would break a table cell or start markup."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")
