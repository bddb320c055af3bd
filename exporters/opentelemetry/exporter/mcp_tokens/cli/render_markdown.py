"""Profiles and diffs as GitHub-flavoured Markdown (`--format markdown`), e.g. for PR comments."""

from __future__ import annotations

import re

from . import texts
from .diff import DiffResult
from .profile import ServerProfile
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
            f"| {_code(tool.name)} | {tool.definition.tokens:,} | {share} | {texts.worst_case(tool)} "
            f"| {tool.output.bound.value} | {texts.risk(tool.risk)} |"
        )
    lines.extend(_output_fields(profile))
    lines.extend(_calls(profile))
    lines.extend(_recommendations(profile.grouped_recommendations()))
    return "\n".join(lines) + "\n"


def _output_fields(profile: ServerProfile) -> list[str]:
    rows = [
        f"- {_code(tool.name)}: {_escape(texts.output_fields(tool))}"
        for tool in profile.tools
        if tool.output.bound is not Bound.UNKNOWN and tool.output.fields
    ]
    return ["", "### Worst-case tokens per output field", "", *rows] if rows else []


def _calls(profile: ServerProfile) -> list[str]:
    lines: list[str] = []
    for tool in profile.tools:
        if tool.call is not None:
            facts = [f"- {_escape(line)}" for line in texts.call_lines(tool.call)]
            lines.extend(["", f"### Measured call: {_code(tool.name)}", "", *facts])
    return lines


def _recommendations(recommendations: list[tuple[Recommendation, list[str]]]) -> list[str]:
    if not recommendations:
        return ["", "No recommendations."]
    lines = ["", "### Recommendations", ""]
    for r, tools in recommendations:
        where = ", ".join(_code(tool) for tool in tools) + ": " if tools else ""
        lines.append(f"- **{r.severity.value}** {where}{_escape(r.message)} <sub>({r.rule})</sub>")
    return lines


def diff_markdown(result: DiffResult) -> str:
    worst = result.worst.value.upper() if result.worst is not None else "NO CHANGES"
    old, new = result.old, result.new
    totals = texts.diff_totals(old.definition_tokens, new.definition_tokens, len(old.tools), len(new.tools))
    lines = [
        f"## mcp-tokens diff: {worst}",
        "",
        f"{_code(old.source)} → {_code(new.source)}",
        "",
        totals,
        "",
    ]
    if not result.changes:
        lines.append("No changes.")
        return "\n".join(lines) + "\n"
    lines.extend(["| Class | Tool | Change |", "|---|---|---|"])
    for change in result.changes:
        tool = _code(change.tool) if change.tool else "(server)"
        lines.append(f"| {change.change_class.value.upper()} | {tool} | {_escape(change.message)} |")
    return "\n".join(lines) + "\n"


# Characters that could turn untrusted text into a link, an image (fetched when the comment is
# viewed), HTML, a code span or a new table cell. Emphasis characters are left alone: at worst
# they style text, and escaping them would make every snake_case name unreadable in the source.
_MARKUP = re.compile(r"([\\`\[\]<>|])")


def _escape(text: str) -> str:
    """Untrusted text (names, paths, messages) as inert Markdown, on one line."""
    return _MARKUP.sub(r"\\\1", texts.printable(" ".join(text.splitlines())))


def _code(text: str) -> str:
    """Untrusted text as a code span, fenced by more backticks than it contains in a row."""
    flat = texts.printable(" ".join(text.splitlines())).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    padded = f" {flat} " if flat.startswith("`") or flat.endswith("`") else flat
    return f"{fence}{padded}{fence}"
