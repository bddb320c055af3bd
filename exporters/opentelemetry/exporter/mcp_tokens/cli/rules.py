# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The recommendation rules, as a table: one row per rule (id, severity, condition, message).

A rule's condition reads the facts of one tool (`ToolFacts`) or of the whole server
(`ServerFacts`); its message is a `str.format` template over the same facts, so adding a
recommendation is adding a row. Limits the rules use are named constants below, listed
with the table in `docs/telemetry.md` and in `mcp-tokens rules`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from opentelemetry.instrumentation.mcp_tokens import semconv

LONG_DESCRIPTION_TOKENS = 300
HUGE_ENUM_VALUES = 32
DEEP_SCHEMA_LEVELS = 5
MANY_FIELDS = 15
DEFINITION_TOKENS_PER_PARAMETER = 250
DEFINITION_TOKENS_FLOOR = 500
FORMATTING_SHARE = 0.10
DUPLICATE_NOTICE_TOKENS = 200  # below this, the text copy of structuredContent is not worth a note
TAX_WARNING_SHARE = 0.05
TAX_ERROR_SHARE = 0.10  # the same share as the dashboards' definition-tax alert
DEFAULT_HOST_CAP = semconv.HOST_RESULT_CAP  # a larger result is refused by such hosts


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class ToolFacts:
    """Everything the tool rules look at; also the fields their messages may name."""

    tool: str
    definition_tokens: int
    description_tokens: int
    params: int
    has_output_schema: bool
    bound: str
    risk: str | None
    worst_case_tokens: int | None
    structured_tokens: int | None
    output_fields: int
    unbounded_collection: str
    uncapped_value: str
    depth: int
    deepest_path: str
    largest_enum: int
    largest_enum_path: str
    largest_enum_tokens: int
    text_copy: bool
    open_world: bool = False  # annotations.openWorldHint is true
    nominal_note: str = ""  # set when the worst case uses the assumed sizes of unbounded parts
    measured: bool = False
    measured_tokens: int = 0
    measured_risk: str = ""
    duplicate_tokens: int = 0
    formatting_tokens: int = 0
    padding_findings: int = 0
    padding_reasons: str = ""
    host_cap: int = DEFAULT_HOST_CAP

    @property
    def definition_limit(self) -> int:
        return max(DEFINITION_TOKENS_FLOOR, DEFINITION_TOKENS_PER_PARAMETER * self.params)

    @property
    def exceeds_bound(self) -> bool:
        return (
            self.measured
            and self.bound == "bounded"
            and self.worst_case_tokens is not None
            and self.measured_tokens > self.worst_case_tokens
        )


@dataclass(frozen=True)
class ServerFacts:
    tools: int
    definition_tokens: int
    context_window: int

    @property
    def share(self) -> float:
        return self.definition_tokens / self.context_window if self.context_window > 0 else 0.0


F = TypeVar("F", ToolFacts, ServerFacts)


@dataclass(frozen=True)
class Rule(Generic[F]):
    id: str
    severity: Severity
    condition: Callable[[F], bool]
    message: str

    def render(self, facts: F) -> str:
        values = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}
        values.update(
            {name: getattr(facts, name) for name in ("definition_limit", "share") if hasattr(facts, name)}
        )
        return self.message.format(**values)


@dataclass(frozen=True)
class Recommendation:
    rule: str
    severity: Severity
    message: str
    tool: str | None = None


TOOL_RULES: tuple[Rule[ToolFacts], ...] = (
    Rule(
        "unbounded-collection",
        Severity.ERROR,
        lambda f: bool(f.unbounded_collection),
        "Unbounded collection {unbounded_collection}: paginate (a cursor and a page size) or cap the items "
        "with maxItems/maxProperties.",
    ),
    Rule(
        "no-size-cap",
        Severity.WARNING,
        lambda f: bool(f.uncapped_value),
        "No size cap on {uncapped_value}: set maxLength and truncate longer values with a notice that says "
        "how to get the rest (an offset, a page or a narrower query).",
    ),
    Rule(
        "worst-case-critical",
        Severity.ERROR,
        lambda f: f.risk == "critical",
        "Worst case is {worst_case_tokens:,} tokens{nominal_note} (critical): lower maxItems/maxLength, "
        "or return a summary with a way to fetch the details.",
    ),
    Rule(
        "exceeds-host-cap",
        Severity.ERROR,
        lambda f: f.worst_case_tokens is not None and f.worst_case_tokens > f.host_cap,
        "Worst case is {worst_case_tokens:,} tokens{nominal_note}, over a host's {host_cap:,}-token result "
        "cap (--host-cap; Claude Code's MAX_MCP_OUTPUT_TOKENS): such hosts refuse the whole result. "
        "Paginate, or cap results in the server (OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD=truncate).",
    ),
    Rule(
        "measured-exceeds-host-cap",
        Severity.ERROR,
        lambda f: f.measured and f.measured_tokens > f.host_cap,
        "The measured response is {measured_tokens:,} tokens, over a host's {host_cap:,}-token result cap: "
        "such hosts refuse it. Paginate, or cap results in the server "
        "(OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD).",
    ),
    Rule(
        "worst-case-high",
        Severity.WARNING,
        lambda f: f.risk == "high",
        "Worst case is {worst_case_tokens:,} tokens{nominal_note} (high): consider smaller pages or "
        "shorter fields.",
    ),
    Rule(
        "unknown-bound-open-world",
        Severity.WARNING,
        lambda f: not f.has_output_schema and f.open_world,
        "No outputSchema on an open-world tool (openWorldHint): what it returns comes from outside your "
        "server, so declare an outputSchema with maxItems and maxLength, and truncate to it.",
    ),
    Rule(
        "unknown-bound",
        Severity.INFO,
        lambda f: not f.has_output_schema and not f.open_world,
        "No outputSchema: declare one, with maxItems and maxLength, so its response size can be checked "
        "before it ships.",
    ),
    Rule(
        "long-description",
        Severity.WARNING,
        lambda f: f.description_tokens > LONG_DESCRIPTION_TOKENS,
        "Description is {description_tokens:,} tokens (over " + str(LONG_DESCRIPTION_TOKENS) + "): keep "
        "what a model needs to choose the tool; move examples and policies to a resource.",
    ),
    Rule(
        "huge-enum",
        Severity.WARNING,
        lambda f: f.largest_enum > HUGE_ENUM_VALUES,
        "{largest_enum_path} lists {largest_enum} enum values ({largest_enum_tokens:,} tokens in every "
        "conversation): accept a string and validate it server-side, or split the tool.",
    ),
    Rule(
        "deep-schema",
        Severity.WARNING,
        lambda f: f.depth > DEEP_SCHEMA_LEVELS,
        "Schema nests {depth} levels deep (at {deepest_path}): flatten it; every level costs tokens and "
        "models fill deep structures less reliably.",
    ),
    Rule(
        "heavy-definition",
        Severity.WARNING,
        lambda f: f.definition_tokens > f.definition_limit,
        "Definition costs {definition_tokens:,} tokens for {params} parameter(s) (over "
        "{definition_limit:,}): trim descriptions and schema annotations (titles, examples, defaults).",
    ),
    Rule(
        "many-output-fields",
        Severity.WARNING,
        lambda f: f.output_fields > MANY_FIELDS,
        "Output declares {output_fields} fields (over " + str(MANY_FIELDS) + "): return the fields a model "
        "needs and offer the rest on request.",
    ),
    Rule(
        "many-parameters",
        Severity.WARNING,
        lambda f: f.params > MANY_FIELDS,
        "Takes {params} parameters (over " + str(MANY_FIELDS) + "): split the tool or group rarely used "
        "options.",
    ),
    Rule(
        "duplicated-structured-content",
        Severity.INFO,
        lambda f: f.text_copy and not f.measured and (f.structured_tokens or 0) > DUPLICATE_NOTICE_TOKENS,
        "Results carry structuredContent and, as the spec advises, the same JSON as text: up to "
        "{structured_tokens:,} tokens twice. If your clients read structuredContent, keep the text short.",
    ),
    Rule(
        "duplicated-content-measured",
        Severity.WARNING,
        lambda f: f.duplicate_tokens > 0,
        "The measured response repeats {duplicate_tokens:,} tokens (structuredContent also sent as text, "
        "or a repeated block): send one copy where your clients allow it.",
    ),
    Rule(
        "formatting-measured",
        Severity.WARNING,
        lambda f: f.formatting_tokens > FORMATTING_SHARE * max(1, f.measured_tokens),
        "{formatting_tokens:,} of the {measured_tokens:,} measured tokens are JSON indentation: return "
        "compact JSON.",
    ),
    Rule(
        "padding-measured",
        Severity.ERROR,
        lambda f: f.padding_findings > 0,
        "The measured response looks padded ({padding_reasons}): remove invisible or repeated filler.",
    ),
    Rule(
        "exceeds-declared-bound",
        Severity.ERROR,
        lambda f: f.exceeds_bound,
        "The measured response ({measured_tokens:,} tokens) exceeds the worst case its outputSchema allows "
        "({worst_case_tokens:,}): the schema's limits are not enforced.",
    ),
    Rule(
        "measured-risk",
        Severity.WARNING,
        lambda f: f.measured_risk in ("high", "critical"),
        "The measured response is {measured_tokens:,} tokens ({measured_risk}).",
    ),
)

SERVER_RULES: tuple[Rule[ServerFacts], ...] = (
    Rule(
        "definition-tax-critical",
        Severity.ERROR,
        lambda f: f.share > TAX_ERROR_SHARE,
        "Tool definitions cost {definition_tokens:,} tokens, {share:.1%} of a {context_window:,}-token "
        "window, in every conversation: trim descriptions, merge similar tools, or expose fewer tools.",
    ),
    Rule(
        "definition-tax-high",
        Severity.WARNING,
        lambda f: TAX_WARNING_SHARE < f.share <= TAX_ERROR_SHARE,
        "Tool definitions cost {definition_tokens:,} tokens, {share:.1%} of a {context_window:,}-token "
        "window, in every conversation: trim the largest definitions.",
    ),
)


def evaluate_tool(facts: ToolFacts) -> tuple[Recommendation, ...]:
    return _sorted(
        Recommendation(rule.id, rule.severity, rule.render(facts), facts.tool)
        for rule in TOOL_RULES
        if rule.condition(facts)
    )


def evaluate_server(facts: ServerFacts) -> tuple[Recommendation, ...]:
    return _sorted(
        Recommendation(rule.id, rule.severity, rule.render(facts))
        for rule in SERVER_RULES
        if rule.condition(facts)
    )


def _sorted(recommendations: Iterable[Recommendation]) -> tuple[Recommendation, ...]:
    return tuple(sorted(recommendations, key=lambda r: -r.severity.rank))


def rule_table() -> list[tuple[str, str, str]]:
    """(id, severity, message template) of every rule, tools first, for docs and `--help`."""
    rows: list[tuple[str, str, str]] = [(r.id, r.severity.value, r.message) for r in TOOL_RULES]
    rows.extend((r.id, r.severity.value, r.message) for r in SERVER_RULES)
    return rows
