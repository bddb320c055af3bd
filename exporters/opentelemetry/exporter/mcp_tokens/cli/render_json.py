# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Profiles and diffs as JSON documents (`--format json`), for scripts and CI.

Both documents carry `format` and `version`, like the lock file, so consumers can check
what they parse. Key order is stable (sorted); numbers are plain integers and fractions.
"""

from __future__ import annotations

import json
from typing import Any

from .diff import DiffResult
from .hosts import host_document
from .lockfile import Lock
from .profile import CallProfile, ServerProfile, Settings, ToolProfile
from .rules import Recommendation
from .static import Bound

PROFILE_FORMAT = "mcp-tokens.profile"
DIFF_FORMAT = "mcp-tokens.diff"
VERSION = 1


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def profile_document(profile: ServerProfile) -> dict[str, Any]:
    document = _profile_document(profile)
    if profile.hosts:
        document["hosts"] = [host_document(check) for check in profile.hosts]
    return document


def _profile_document(profile: ServerProfile) -> dict[str, Any]:
    overall = profile.overall_risk
    return {
        "format": PROFILE_FORMAT,
        "version": VERSION,
        "target": profile.target,
        "client": profile.client,
        "server": {
            "name": profile.info.name,
            "version": profile.info.version,
            "protocol_version": profile.info.protocol_version,
        },
        "settings": settings_document(profile.settings),
        "totals": {
            "tools": len(profile.tools),
            "definition_tokens": profile.definition_tokens,
            "definition_share": round(profile.definition_share, 6),
            "overall_risk": overall.value if overall is not None else None,
            "unbounded_tools": profile.tools_with(Bound.UNBOUNDED),
            "unknown_bound_tools": profile.tools_with(Bound.UNKNOWN),
        },
        "tools": [tool_document(tool, profile.settings) for tool in profile.tools],
        "recommendations": [recommendation_document(r) for r in profile.recommendations],
    }


def settings_document(settings: Settings) -> dict[str, Any]:
    risk = settings.risk
    return {
        "encoding": settings.encoding,
        "context_window": settings.context_window,
        "risk_thresholds": [risk.low, risk.medium, risk.high],
        "assumptions": settings.assumptions.as_dict(),
    }


def tool_document(tool: ToolProfile, settings: Settings) -> dict[str, Any]:
    definition, output = tool.definition, tool.output
    return {
        "name": tool.name,
        "title": tool.title,
        "definition": {
            "tokens": definition.tokens,
            "exact": definition.exact,
            "share": round(definition.tokens / settings.context_window, 6),
            "digest": definition.digest,
            "parameters": definition.params,
            "fields": dict(definition.fields),
        },
        "output": {
            "bound": output.bound.value,
            "structured_tokens": output.structured_tokens,
            "worst_case_tokens": output.worst_case_tokens,
            "risk": tool.risk.value if tool.risk is not None else None,
            "fields": [
                {"name": f.name, "tokens": f.tokens, "bounded": f.bounded, "kind": f.kind}
                for f in output.fields
            ],
            "unbounded": [{"path": part.path, "cause": part.cause.value} for part in output.unbounded],
            "note": output.note,
        },
        "call": call_document(tool.call) if tool.call is not None else None,
        "recommendations": [recommendation_document(r) for r in tool.recommendations],
    }


def call_document(call: CallProfile) -> dict[str, Any]:
    analysis = call.analysis
    return {
        "arguments": dict(call.arguments),
        "is_error": call.is_error,
        "tokens": analysis.tokens,
        "exact": analysis.exact,
        "risk": analysis.risk.value,
        "blocks": analysis.block_count,
        "overhead": {kind.value: tokens for kind, tokens in analysis.overhead},
        "overhead_ratio": round(analysis.overhead_ratio, 6),
        "padding": [
            {
                "reason": finding.reason.value,
                "block": finding.block,
                "offset": finding.offset,
                "score": round(finding.score, 6),
                "detail": finding.detail,
            }
            for finding in analysis.padding
        ],
    }


def recommendation_document(recommendation: Recommendation) -> dict[str, Any]:
    return {
        "rule": recommendation.rule,
        "severity": recommendation.severity.value,
        "tool": recommendation.tool,
        "message": recommendation.message,
    }


def diff_document(result: DiffResult) -> dict[str, Any]:
    worst = result.worst
    return {
        "format": DIFF_FORMAT,
        "version": VERSION,
        "old": _side(result.old),
        "new": _side(result.new),
        "tax_threshold": result.tax_threshold,
        "worst": worst.value if worst is not None else None,
        "exit_code": int(result.exit_code),
        "changes": [
            {"class": c.change_class.value, "kind": c.kind, "tool": c.tool, "message": c.message}
            for c in result.changes
        ],
    }


def _side(lock: Lock) -> dict[str, Any]:
    return {
        "source": lock.source,
        "server": {"name": lock.server_name, "version": lock.server_version},
        "tools": len(lock.tools),
        "definition_tokens": lock.definition_tokens,
    }
