# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Compare two token contracts (lock files, or a lock file and a live server) and classify each change.

| change | class |
|---|---|
| tool removed | BREAKING (clients calling it fail) |
| risk tier of a tool's worst case escalated | BREAKING |
| bounded output became unbounded, or lost its outputSchema | RISKY |
| unknown bound (no outputSchema) now declared unbounded | RISKY |
| definition tax grew by more than the threshold (tool or server total) | RISKY |
| tool added that is unbounded, unknown-bound or high/critical | RISKY |
| worst case now known and high/critical (outputSchema added) | RISKY |
| risk de-escalated; output became bounded; definition tax shrank past the threshold | SAFE |
| tool added, bounded and low/medium | SAFE |
| anything else that changed (smaller tax changes, same-tier worst cases, reworded definitions) | INFO |

Risk tiers are compared only while a tool's bound kind stays the same: across a change of
bound, the bound row says what happened (an unbounded worst case is a figure at assumed sizes).
A new tool is at most RISKY, not BREAKING: no client depends on it yet; its cost to every
conversation is caught by the definition-tax rows. The exit code follows the worst class:
BREAKING 4, RISKY 3, otherwise 0. Growth counts only past `MIN_TAX_GROWTH_TOKENS`, so a
five-token tool does not turn RISKY for one extra word.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskTier

from .errors import CliError, ExitCode
from .lockfile import Lock, ToolLock
from .static import Bound

DEFAULT_TAX_THRESHOLD = 0.10
MIN_TAX_GROWTH_TOKENS = 25


class ChangeClass(str, Enum):
    BREAKING = "breaking"
    RISKY = "risky"
    SAFE = "safe"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 0, "safe": 1, "risky": 2, "breaking": 3}[self.value]


@dataclass(frozen=True)
class Change:
    change_class: ChangeClass
    kind: str
    tool: str | None
    message: str


@dataclass(frozen=True)
class DiffResult:
    old: Lock
    new: Lock
    changes: tuple[Change, ...]
    tax_threshold: float

    @property
    def worst(self) -> ChangeClass | None:
        return max((c.change_class for c in self.changes), key=lambda c: c.rank, default=None)

    @property
    def exit_code(self) -> ExitCode:
        if self.worst is ChangeClass.BREAKING:
            return ExitCode.DIFF_BREAKING
        return ExitCode.DIFF_RISKY if self.worst is ChangeClass.RISKY else ExitCode.OK


def compare(old: Lock, new: Lock, tax_threshold: float = DEFAULT_TAX_THRESHOLD) -> DiffResult:
    _check_comparable(old, new)
    changes: list[Change] = []
    for name in sorted(set(old.tools) | set(new.tools)):
        before, after = old.tools.get(name), new.tools.get(name)
        if after is None:
            changes.append(
                Change(ChangeClass.BREAKING, "tool-removed", name, "tool removed: clients that call it fail")
            )
        elif before is None:
            changes.append(_added(name, after))
        else:
            changes.extend(_tool_changes(name, before, after, tax_threshold))
    changes.extend(_tax_change(None, old.definition_tokens, new.definition_tokens, tax_threshold, total=True))
    ordered = sorted(changes, key=lambda c: (-c.change_class.rank, c.tool or "", c.kind))
    return DiffResult(old, new, tuple(ordered), tax_threshold)


def _check_comparable(old: Lock, new: Lock) -> None:
    differences = [
        f"{label} {a} vs {b}"
        for label, a, b in (
            ("encoding", old.settings.encoding, new.settings.encoding),
            ("risk thresholds", _thresholds(old), _thresholds(new)),
            ("assumptions", old.settings.assumptions, new.settings.assumptions),
        )
        if a != b
    ]
    if differences:
        raise CliError(
            ExitCode.LOCK_INCOMPATIBLE,
            f"{old.source} and {new.source} were made with different settings ({'; '.join(differences)}): "
            "regenerate one of them with the other's settings",
        )


def _thresholds(lock: Lock) -> str:
    risk = lock.settings.risk
    return f"{risk.low},{risk.medium},{risk.high}"


def _added(name: str, tool: ToolLock) -> Change:
    summary = f"new tool: {tool.definition_tokens:,} definition tokens, {_describe_output(tool)}"
    worrying = tool.bound is not Bound.BOUNDED or (
        tool.risk is not None and tool.risk.rank >= RiskTier.HIGH.rank
    )
    return Change(ChangeClass.RISKY if worrying else ChangeClass.SAFE, "tool-added", name, summary)


def _describe_output(tool: ToolLock) -> str:
    if tool.bound is Bound.UNKNOWN:
        return "no outputSchema (unknown bound)"
    risk = tool.risk.value if tool.risk is not None else "unknown"
    return f"{tool.bound.value}, worst case {_worst(tool)} ({risk})"


def _tool_changes(name: str, old: ToolLock, new: ToolLock, threshold: float) -> Iterator[Change]:
    if old.bound is new.bound:
        yield from _risk_change(name, old, new)
    else:
        yield from _bound_change(name, old, new)
    yield from _tax_change(name, old.definition_tokens, new.definition_tokens, threshold, total=False)
    if old.digest != new.digest and old.definition_tokens == new.definition_tokens:
        yield Change(ChangeClass.INFO, "definition-changed", name, "definition changed, same token cost")


_BOUND_CHANGES = {
    (Bound.BOUNDED, Bound.UNBOUNDED): (ChangeClass.RISKY, "became-unbounded", "output became unbounded"),
    (Bound.BOUNDED, Bound.UNKNOWN): (
        ChangeClass.RISKY,
        "lost-bound",
        "outputSchema removed: bound now unknown",
    ),
    (Bound.UNKNOWN, Bound.UNBOUNDED): (
        ChangeClass.RISKY,
        "became-unbounded",
        "outputSchema added, unbounded",
    ),
    (Bound.UNBOUNDED, Bound.UNKNOWN): (
        ChangeClass.RISKY,
        "lost-bound",
        "outputSchema removed: bound now unknown",
    ),
    (Bound.UNBOUNDED, Bound.BOUNDED): (ChangeClass.SAFE, "became-bounded", "output became bounded"),
    (Bound.UNKNOWN, Bound.BOUNDED): (ChangeClass.SAFE, "became-bounded", "outputSchema added, bounded"),
}


def _bound_change(name: str, old: ToolLock, new: ToolLock) -> Iterator[Change]:
    """A change of bound. Risk tiers are not compared across it: an unbounded worst case is a
    figure at assumed sizes, and an unknown one does not exist."""
    change_class, kind, message = _BOUND_CHANGES[(old.bound, new.bound)]
    yield Change(change_class, kind, name, f"{message} (worst case {_worst(old)} → {_worst(new)})")
    if old.bound is Bound.UNKNOWN and new.risk is not None and new.risk.rank >= RiskTier.HIGH.rank:
        message = f"worst case now known: {_worst(new)} ({new.risk.value})"
        yield Change(ChangeClass.RISKY, "risk-known", name, message)


def _worst(tool: ToolLock) -> str:
    if tool.bound is Bound.UNKNOWN or tool.worst_case_tokens is None:
        return "unknown"
    prefix = "≥" if tool.bound is Bound.UNBOUNDED else ""
    return f"{prefix}{tool.worst_case_tokens:,} tokens"


def _risk_change(name: str, old: ToolLock, new: ToolLock) -> Iterator[Change]:
    """Risk tier changes of a tool whose bound kind stayed the same."""
    if old.risk is None or new.risk is None:
        return
    worst = f"worst case {_worst(old)} → {_worst(new)}"
    if new.risk.rank > old.risk.rank:
        message = f"risk escalated {old.risk.value} → {new.risk.value} ({worst})"
        yield Change(ChangeClass.BREAKING, "risk-escalated", name, message)
    elif new.risk.rank < old.risk.rank:
        message = f"risk de-escalated {old.risk.value} → {new.risk.value} ({worst})"
        yield Change(ChangeClass.SAFE, "risk-de-escalated", name, message)
    elif old.worst_case_tokens != new.worst_case_tokens:
        yield Change(ChangeClass.INFO, "worst-case-changed", name, f"{worst}, still {new.risk.value}")


def _tax_change(tool: str | None, old: int, new: int, threshold: float, *, total: bool) -> Iterator[Change]:
    if old == new:
        return
    growth = (new - old) / old if old > 0 else float("inf")
    what = "definition tax of the server" if total else "definition tax"
    message = f"{what} {old:,} → {new:,} tokens ({_percent(growth)})"
    kind = "server-tax" if total else "tax"
    significant = abs(new - old) >= MIN_TAX_GROWTH_TOKENS and abs(growth) > threshold
    if significant and new > old:
        yield Change(ChangeClass.RISKY, f"{kind}-growth", tool, message)
    elif significant:
        yield Change(ChangeClass.SAFE, f"{kind}-shrink", tool, message)
    else:
        yield Change(ChangeClass.INFO, f"{kind}-changed", tool, message)


def _percent(growth: float) -> str:
    return "new" if growth == float("inf") else f"{growth:+.1%}"
