# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A server's token profile: exact definition costs, static response estimates, risk, advice.

`build_profile` turns what `connect.fetch` saw into a `ServerProfile`. Definition tokens
are the engine's tools/list analysis of each tool (the compact JSON of the fields a
model is given), so they equal what the instrumentation reports; response estimates come
from `static`; an optional real call is analysed by the engine like any tool result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.analysis import (
    Analysis,
    Analyzer,
    AnalyzerOptions,
    PayloadKind,
)
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import TOOL_DEFINITION_FIELDS
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import DEFAULT_CONTEXT_WINDOW
from opentelemetry.instrumentation.mcp_tokens.engine.overhead import OverheadKind
from opentelemetry.instrumentation.mcp_tokens.engine.risk import (
    DEFAULT_RISK_THRESHOLDS,
    RiskThresholds,
    RiskTier,
)
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TokenCounter,
    TokenizerLoader,
    TokenizerSpec,
)

from . import rules
from .connect import CallOutcome, ServerInfo, Snapshot
from .errors import CliError, ExitCode
from .hosts import HostCheck
from .static import Assumptions, Bound, OutputEstimate, SchemaStats, estimate_output, schema_stats


@dataclass(frozen=True)
class Settings:
    """What a profile's numbers depend on; a lock file records it so diffs compare like with like."""

    encoding: str = "o200k_base"
    risk: RiskThresholds = DEFAULT_RISK_THRESHOLDS
    assumptions: Assumptions = field(default_factory=Assumptions)
    context_window: int = DEFAULT_CONTEXT_WINDOW
    host_cap: int = rules.DEFAULT_HOST_CAP  # a result over this many tokens is refused by such hosts


@dataclass(frozen=True)
class DefinitionCost:
    tokens: int
    exact: bool
    fields: tuple[tuple[str, int], ...]  # tokens of each `"field":value` on its own (attribution)
    digest: str
    params: int
    input_stats: SchemaStats


@dataclass(frozen=True)
class CallProfile:
    tool: str
    arguments: Mapping[str, Any]
    analysis: Analysis
    is_error: bool

    def overhead(self, kind: OverheadKind) -> int:
        return dict(self.analysis.overhead).get(kind, 0)


@dataclass(frozen=True)
class ToolProfile:
    name: str
    title: str | None
    definition: DefinitionCost
    output: OutputEstimate
    risk: RiskTier | None
    recommendations: tuple[rules.Recommendation, ...] = ()
    call: CallProfile | None = None


@dataclass(frozen=True)
class ServerProfile:
    target: str
    info: ServerInfo
    client: str
    settings: Settings
    tools: tuple[ToolProfile, ...]
    recommendations: tuple[rules.Recommendation, ...] = ()
    hosts: tuple[HostCheck, ...] = ()  # the verdicts of the hosts chosen with --host

    @property
    def definition_tokens(self) -> int:
        return sum(tool.definition.tokens for tool in self.tools)

    @property
    def definition_share(self) -> float:
        return self.definition_tokens / self.settings.context_window

    @property
    def overall_risk(self) -> RiskTier | None:
        """The highest tier of any tool's worst case or measured call (None: all unknown)."""
        tiers = [tier for tool in self.tools for tier in _tiers(tool)]
        return max(tiers, key=lambda tier: tier.rank) if tiers else None

    def tools_with(self, bound: Bound) -> list[str]:
        return [tool.name for tool in self.tools if tool.output.bound is bound]

    def all_recommendations(self) -> list[rules.Recommendation]:
        """Server-level advice first, then each tool's, most severe first."""
        every = [*self.recommendations, *(r for tool in self.tools for r in tool.recommendations)]
        return sorted(every, key=lambda r: -r.severity.rank)

    def grouped_recommendations(self) -> list[tuple[rules.Recommendation, list[str]]]:
        """`all_recommendations` with identical advice to several tools given once, with their names."""
        groups: dict[tuple[str, str], tuple[rules.Recommendation, list[str]]] = {}
        for recommendation in self.all_recommendations():
            key = (recommendation.rule, recommendation.message)
            tools = groups.setdefault(key, (recommendation, []))[1]
            if recommendation.tool is not None:
                tools.append(recommendation.tool)
        return list(groups.values())


def _tiers(tool: ToolProfile) -> list[RiskTier]:
    tiers = [tool.risk] if tool.risk is not None else []
    if tool.call is not None:
        tiers.append(tool.call.analysis.risk)
    return tiers


_LOADERS: dict[TokenizerSpec, TokenizerLoader] = {}


def start_tokenizer(encoding: str, tokenizer_file: str | None = None) -> TokenizerLoader:
    """Start loading the tokenizer on a thread (about 0.5 s for o200k) while the server starts."""
    spec = TokenizerSpec(encoding=encoding, path=tokenizer_file)
    loader = _LOADERS.get(spec)
    if loader is None:
        loader = _LOADERS[spec] = TokenizerLoader(spec)
        loader.start()
    return loader


def any_counter(encoding: str) -> TokenCounter:
    """A counter in `encoding`, exact or (when its tokenizer cannot load here) estimated."""
    return TokenCounter(start_tokenizer(encoding).tokenizer())


def exact_counter(loader: TokenizerLoader) -> TokenCounter:
    """A counter over the loaded tokenizer; the estimate fallback is refused (counts must be exact)."""
    tokenizer = loader.tokenizer()
    if not tokenizer.exact:
        spec = loader.spec
        needs_ctok = "ctok" in str(loader.error)
        hint = " (Claude encodings need the `claude` extra, on Python >= 3.12)" if needs_ctok else ""
        raise CliError(
            ExitCode.USAGE, f"cannot load tokenizer {spec.path or spec.encoding}: {loader.error}{hint}"
        )
    return TokenCounter(tokenizer)


def build_profile(
    snapshot: Snapshot, counter: TokenCounter, settings: Settings, target: str
) -> ServerProfile:
    settings = dataclasses.replace(settings, encoding=counter.name)  # a tokenizer file names itself
    analyzer = Analyzer(counter, AnalyzerOptions(risk_thresholds=settings.risk))
    tools = tuple(_tool_profile(tool, analyzer, settings, snapshot.call) for tool in snapshot.tools)
    facts = rules.ServerFacts(
        tools=len(tools),
        definition_tokens=sum(tool.definition.tokens for tool in tools),
        context_window=settings.context_window,
    )
    return ServerProfile(
        target, snapshot.info, snapshot.client, settings, tools, rules.evaluate_server(facts)
    )


def _tool_profile(
    tool: Mapping[str, Any], analyzer: Analyzer, settings: Settings, call: CallOutcome | None
) -> ToolProfile:
    name = str(tool["name"])
    count = _count_with(analyzer.counter)
    definition = definition_cost(tool, analyzer)
    output = estimate_output(tool, count, settings.assumptions)
    worst = output.worst_case_tokens
    risk = settings.risk.classify(worst) if worst is not None else None
    measured = _call_profile(call, analyzer) if call is not None and call.call.name == name else None
    facts = tool_facts(
        name,
        definition=definition,
        output=output,
        risk=risk,
        assumptions=settings.assumptions,
        call=measured,
        description_tokens=count(_description(tool)),
        open_world=_annotation(tool, "openWorldHint") is True,
        host_cap=settings.host_cap,
    )
    title = tool.get("title")
    return ToolProfile(
        name=name,
        title=title if isinstance(title, str) else None,
        definition=definition,
        output=output,
        risk=risk,
        recommendations=rules.evaluate_tool(facts),
        call=measured,
    )


def definition_cost(tool: Mapping[str, Any], analyzer: Analyzer) -> DefinitionCost:
    analysis = analyzer.analyze(PayloadKind.TOOL_LIST, {"tools": [tool]})
    count = _count_with(analyzer.counter)
    shown = {key: value for key, value in tool.items() if key in TOOL_DEFINITION_FIELDS}
    fields = tuple((key, count(_compact({key: value})[1:-1])) for key, value in shown.items())
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return DefinitionCost(
        tokens=analysis.tokens,
        exact=analysis.exact,
        fields=fields,
        digest=definition_digest(shown),
        params=len(properties) if isinstance(properties, Mapping) else 0,
        input_stats=schema_stats(schema, count),
    )


def definition_digest(shown: Mapping[str, Any]) -> str:
    """sha256 of the model-visible fields as canonical JSON (sorted keys): key order is not a change."""
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def tool_facts(
    name: str,
    *,
    definition: DefinitionCost,
    output: OutputEstimate,
    risk: RiskTier | None,
    assumptions: Assumptions,
    call: CallProfile | None,
    description_tokens: int,
    open_world: bool = False,
    host_cap: int = rules.DEFAULT_HOST_CAP,
) -> rules.ToolFacts:
    stats, inputs = output.stats, definition.input_stats
    deepest = stats if stats.depth >= inputs.depth else inputs
    enum = stats if stats.largest_enum >= inputs.largest_enum else inputs
    measured: dict[str, Any] = {}
    if call is not None:
        reasons = sorted({finding.reason.value for finding in call.analysis.padding})
        measured = {
            "measured": True,
            "measured_tokens": call.analysis.tokens,
            "measured_risk": call.analysis.risk.value,
            "duplicate_tokens": call.overhead(OverheadKind.DUPLICATE),
            "formatting_tokens": call.overhead(OverheadKind.FORMATTING),
            "padding_findings": len(call.analysis.padding),
            "padding_reasons": ", ".join(reasons),
        }
    return rules.ToolFacts(
        tool=name,
        definition_tokens=definition.tokens,
        description_tokens=description_tokens,
        params=definition.params,
        has_output_schema=output.bound is not Bound.UNKNOWN,
        bound=output.bound.value,
        risk=risk.value if risk is not None else None,
        worst_case_tokens=output.worst_case_tokens,
        structured_tokens=output.structured_tokens,
        output_fields=stats.fields,
        unbounded_collection=output.paths(collection=True),
        uncapped_value=output.paths(collection=False),
        depth=deepest.depth,
        deepest_path=("input " if deepest is inputs else "output ") + deepest.deepest_path,
        largest_enum=enum.largest_enum,
        largest_enum_path=("input " if enum is inputs else "output ") + enum.largest_enum_path,
        largest_enum_tokens=enum.largest_enum_tokens,
        text_copy=assumptions.text_copy,
        open_world=open_world,
        host_cap=host_cap,
        nominal_note=" at the assumed sizes of its unbounded parts"
        if output.bound is Bound.UNBOUNDED
        else "",
        **measured,
    )


def _call_profile(outcome: CallOutcome, analyzer: Analyzer) -> CallProfile:
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, outcome.result)
    return CallProfile(
        tool=outcome.call.name,
        arguments=outcome.call.arguments,
        analysis=analysis,
        is_error=outcome.result.get("isError") is True,
    )


def _annotation(tool: Mapping[str, Any], name: str) -> object:
    annotations = tool.get("annotations")
    return annotations.get(name) if isinstance(annotations, Mapping) else None


def _description(tool: Mapping[str, Any]) -> str:
    description = tool.get("description")
    return description if isinstance(description, str) else ""


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _count_with(counter: TokenCounter) -> Callable[[str], int]:
    def count(text: str) -> int:
        return counter.count(text).tokens

    return count
