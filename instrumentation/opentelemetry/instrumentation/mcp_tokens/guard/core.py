# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard: holds tools/call and resources/read results to their limits, on the response path.

`Guard.check(call, result)` returns the result to deliver: the very same object when
nothing applies (or anything goes wrong: the guard fails open), else a new wire dict.
Patches call it on the server before a result is serialised and on the client before the
application sees it; see docs/guardrails.md for the modes.

Order of the checks, for one result:
1. the repeat limit (tools/call): the same tool with the same arguments more than N times
   within the window in one scope gets the guard's action (truncate: the notice alone;
   reject: an error result; warn: unchanged);
2. the result limit (GUARD, the tool's limit) and the budget (GUARD_BUDGET, what is left
   of the scope's context window, on the side that owns the scope): the smaller binding
   limit decides. A `warn` limit only warns; the other limit is still held.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.config import (
    GUARD_OFF,
    GUARD_REJECT,
    GUARD_TRUNCATE,
    GUARD_WARN,
    Settings,
)
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import GUARDED_METHODS
from .accountant import Accountant, Action
from .memory import Deliveries, Repeats
from .policy import Policy, render
from .results import TOOLS_CALL, Assessment, Notice, Results, Shaped
from .tokens import GuardTokenizer, InexactCount, TokenizerUnavailable

_logger = logging.getLogger(__name__)

_ACTIONS = {
    GUARD_TRUNCATE: semconv.GUARD_TRUNCATED,
    GUARD_REJECT: semconv.GUARD_REJECTED,
    GUARD_WARN: semconv.GUARD_WARNED,
}
_NAME_CHARS = 128


@dataclass
class GuardCall:
    """What a patch knows about the operation whose result is being delivered."""

    side: str
    method: str
    tool: str | None = None
    server_name: str | None = None
    scope: BudgetRef | None = None
    # Whether this side owns the scope's budget: the client always; a server only for its
    # own session or connection scopes, not for a scope its client named in baggage.
    owns_scope: bool = False
    arguments: object = None
    uri: str | None = None
    span: Span | None = None


@dataclass(frozen=True)
class Outcome:
    """What the guard did to one result (span attributes, event and metrics)."""

    action: str
    reason: str
    limit: int
    original: int
    exact: bool  # whether `original` was counted exactly
    delivered: int


@dataclass(frozen=True)
class _Limit:
    tokens: int
    mode: str
    reason: str


class Guard:
    def __init__(
        self,
        settings: Settings,
        policy: Policy,
        tokenizer: GuardTokenizer,
        accountant: Accountant,
    ) -> None:
        self._settings = settings
        self._policy = policy
        self._tokenizer = tokenizer
        self._accountant = accountant
        self._deliveries = Deliveries(settings.max_scopes, settings.scope_idle_ttl)
        self._repeats = (
            Repeats(policy.repeat_limit, policy.repeat_window_s, settings.max_scopes)
            if policy.repeats_apply
            else None
        )
        self._results = Results(tokenizer.measure, settings.image_model, tokenizer.size_bound)

    @property
    def policy(self) -> Policy:
        return self._policy

    def start(self) -> None:
        self._tokenizer.start()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the guard's tokenizer has loaded (tests, benchmarks)."""
        return self._tokenizer.wait(timeout)

    def shutdown(self, timeout: float = 5.0) -> None:
        self._accountant.stop(timeout)

    def check_result(self, result: object, **call: Any) -> object:
        """`check` for a patch, which passes the `GuardCall` fields by name."""
        try:
            guard_call = GuardCall(**call)
        except Exception:
            _logger.debug("mcp-tokens could not describe a result to the guard", exc_info=True)
            return result
        return self.check(guard_call, result)

    def check(self, call: GuardCall, result: object) -> object:
        """The result to deliver; never raises (fails open with the original)."""
        if call.method not in GUARDED_METHODS or not isinstance(result, Mapping):
            return result
        try:
            return self._check(call, result)
        except (TokenizerUnavailable, InexactCount) as exc:
            self._accountant.failure(call.side, call.method, semconv.GUARD_FAILURE_NO_TOKENIZER, exc)
        except Exception as exc:
            self._accountant.failure(call.side, call.method, semconv.GUARD_FAILURE_ERROR, exc)
        return result

    # --- deciding ---------------------------------------------------------------------
    def _check(self, call: GuardCall, result: Mapping[str, Any]) -> object:
        if result.get("resultType") == "input_required":
            return result  # not a result yet: the server asks its client for input first
        policy = self._policy
        if self._repeats is not None and call.method == TOOLS_CALL and call.scope is not None:
            calls = self._repeats.record(call.scope.key, call.tool or "", _arguments_json(call.arguments))
            if calls > policy.repeat_limit:
                return self._repeated(call, result)
        limits = self._limits(call)
        if not limits:
            return result
        results = self._results
        budgeted = any(limit.reason == semconv.GUARD_REASON_BUDGET for limit in limits)
        delivered: int | None = None
        for limit in limits:
            assessment = results.assess(call.method, result, limit.tokens, count=budgeted)
            if assessment.fits:
                delivered = assessment.tokens
                break
            if limit.mode == GUARD_WARN:
                self._warn(call, results, assessment, limit)
                continue
            shaped = self._act(call, results, assessment, limit)
            self._charge(call, shaped.delivered)
            return shaped.result
        if delivered is not None:
            self._charge(call, delivered)
        return result

    def _limits(self, call: GuardCall) -> list[_Limit]:
        """The limits that apply to this result, smallest first."""
        policy = self._policy
        limits: list[_Limit] = []
        if policy.mode != GUARD_OFF:
            tokens = policy.limit_of(call.tool if call.method == TOOLS_CALL else None)
            if tokens is not None:
                limits.append(_Limit(tokens, policy.mode, semconv.GUARD_REASON_RESULT_LIMIT))
        if policy.budget_mode != GUARD_OFF and call.scope is not None and call.owns_scope:
            window = call.scope.context_window or self._settings.context_window
            left = max(0, window - self._deliveries.used(call.scope.key))
            limits.append(_Limit(left, policy.budget_mode, semconv.GUARD_REASON_BUDGET))
        return sorted(limits, key=lambda limit: limit.tokens)

    # --- acting -----------------------------------------------------------------------
    def _act(self, call: GuardCall, results: Results, assessment: Assessment, limit: _Limit) -> Shaped:
        action = _ACTIONS[limit.mode]
        original, exact = results.original_tokens(assessment)
        notice = self._notice(call, action, limit.reason, (original, exact), limit.tokens)
        if limit.mode == GUARD_TRUNCATE:
            shaped = results.truncate(assessment, limit.tokens, notice)
        else:
            shaped = results.replace(assessment, limit.tokens, notice)
        self._report(
            call, Outcome(action, limit.reason, limit.tokens, original, exact, shaped.delivered), assessment
        )
        return shaped

    def _repeated(self, call: GuardCall, result: Mapping[str, Any]) -> object:
        policy = self._policy
        limit = policy.limit_of(call.tool) or policy.max_result_tokens
        results = self._results
        assessment = results.read(call.method, result)
        original, exact = results.original_tokens(assessment)
        reason = semconv.GUARD_REASON_REPEAT
        if policy.mode == GUARD_WARN:
            self._report(
                call, Outcome(semconv.GUARD_WARNED, reason, limit, original, exact, original), assessment
            )
            return result
        action = _ACTIONS[policy.mode]
        notice = self._notice(call, action, reason, (original, exact), limit)
        shaped = results.replace(assessment, limit, notice, error=policy.mode == GUARD_REJECT)
        self._report(call, Outcome(action, reason, limit, original, exact, shaped.delivered), assessment)
        self._charge(call, shaped.delivered)
        return shaped.result

    def _warn(self, call: GuardCall, results: Results, assessment: Assessment, limit: _Limit) -> None:
        original, exact = results.original_tokens(assessment)
        outcome = Outcome(semconv.GUARD_WARNED, limit.reason, limit.tokens, original, exact, original)
        self._report(call, outcome, assessment)

    def _notice(
        self, call: GuardCall, action: str, reason: str, original: tuple[int, bool], limit: int
    ) -> Notice:
        template = self._policy.notice_template(
            GUARD_REJECT if action == semconv.GUARD_REJECTED else GUARD_TRUNCATE, reason
        )
        name = (call.tool or call.uri or call.method)[:_NAME_CHARS]
        tokens, exact = original
        if exact:
            stated = f"{tokens:,}"
        elif tokens > limit or reason == semconv.GUARD_REASON_REPEAT:
            stated = f"about {_rounded(tokens):,}"
        else:  # the estimate undershoots, but the result is known to be over the limit
            stated = f"more than {limit:,}"

        def notice(delivered: int) -> str:
            return render(template, tool=name, original=stated, delivered=delivered, limit=limit)

        return notice

    def _charge(self, call: GuardCall, tokens: int) -> None:
        if self._policy.budget_mode != GUARD_OFF and call.scope is not None and call.owns_scope:
            self._deliveries.add(call.scope.key, tokens)

    def _report(self, call: GuardCall, outcome: Outcome, assessment: Assessment) -> None:
        attributes: dict[str, AttributeValue] = {
            semconv.GUARD_ACTION: outcome.action,
            semconv.GUARD_REASON: outcome.reason,
            semconv.GUARD_LIMIT: outcome.limit,
            semconv.GUARD_ORIGINAL_TOKENS: outcome.original,
            semconv.GUARD_ORIGINAL_EXACT: outcome.exact,
            semconv.GUARD_DELIVERED_TOKENS: outcome.delivered,
        }
        span = call.span
        if span is not None and span.is_recording():
            span.set_attributes(attributes)
            span.add_event(semconv.GUARD_EVENT, attributes)
        self._accountant.record(
            Action(
                side=call.side,
                method=call.method,
                server_name=call.server_name,
                tool=call.tool if call.method == TOOLS_CALL else None,
                action=outcome.action,
                reason=outcome.reason,
                delivered=outcome.delivered,
                original=outcome.original,
                assessment=None if outcome.exact else assessment,
                span=span,
                at=time.monotonic(),
            )
        )


def _arguments_json(arguments: object) -> str:
    try:
        return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(type(arguments))


def _rounded(tokens: int) -> int:
    """An estimate stated to three significant digits."""
    return int(float(f"{tokens:.3g}")) if tokens >= 1000 else tokens
