# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""One MCP request/response pair as a patch saw it: the facts handed to the pipeline.

Patches fill an `Exchange` with references to the wire JSON (never copies, never counted
on the caller's path) and submit it; everything else happens on the analysis worker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .scope import BudgetRef


class Side(str, Enum):
    CLIENT = semconv.SIDE_CLIENT
    SERVER = semconv.SIDE_SERVER


# Which payloads of an operation a model is shown, and how the analysis reads them
# (values of engine.analysis.PayloadKind: the engine is imported by the analysis only).
REQUEST_KINDS: dict[str, str] = {
    "tools/call": "tool_arguments",
    "sampling/createMessage": "sampling_request",
}
RESPONSE_KINDS: dict[str, str] = {
    "tools/call": "tool_result",
    "tools/list": "tool_list",
    "resources/read": "resource",
    "prompts/get": "prompt",
    "sampling/createMessage": "sampling_result",
}
# Operations whose tokens enter the agent's context window (sampling runs a separate
# model call, so it is measured but not charged to the budget).
BUDGETED_METHODS = frozenset({"tools/call", "tools/list", "resources/read", "prompts/get"})


class Exchange:
    """One request and its response, as a patch hands them to the pipeline.

    A plain slotted class (one is built per MCP message): defining a slotted dataclass
    costs about a millisecond of every instrumented process's start.
    """

    __slots__ = (
        "before_end",
        "budget",
        "end_ns",
        "end_span",
        "error_type",
        "method",
        "metric_attributes",
        "operation_side",
        "request",
        "request_chars",
        "response",
        "response_chars",
        "server_name",
        "side",
        "span",
        "start_ns",
        "target",
        "weighed",
    )

    def __init__(
        self,
        side: Side,
        method: str,
        *,
        start_ns: int | None = None,
        end_ns: int = 0,
        request: object = None,
        response: object = None,
        target: str | None = None,
        server_name: str | None = None,
        budget: BudgetRef | None = None,
        error_type: str | None = None,
        span: Span | None = None,
        end_span: bool = False,
        metric_attributes: dict[str, AttributeValue] | None = None,
        operation_side: Side | None = None,
    ) -> None:
        self.side = side
        self.method = method
        self.start_ns = time.time_ns() if start_ns is None else start_ns
        self.end_ns = end_ns
        self.request = request
        self.response = response
        self.target = target
        self.server_name = server_name
        self.budget = budget
        self.error_type = error_type
        self.span = span
        # Whether the worker ends `span` (at `end_ns`) once the analysis is on it.
        self.end_span = end_span
        # What the patch left to do to that span just before it ends (setting its semconv
        # attributes): run by whoever ends it, off the request's path.
        self.before_end: Callable[[], None] | None = None
        # Semconv attributes for the duration metric (protocol version, transport, ...).
        self.metric_attributes = {} if metric_attributes is None else metric_attributes
        # Which operation-duration histogram applies when it differs from `side`: semconv
        # measures a request on its sender as a client operation, so a server's own
        # sampling/createMessage request is CLIENT here (and the client's answer SERVER).
        self.operation_side = operation_side
        # About how many characters the payloads' strings hold (None: no payload to count),
        # set once `weighed` (by the worker, off the caller's path unless it is behind): the
        # queue's memory bound, and the length an estimate is made from.
        self.request_chars: int | None = None
        self.response_chars: int | None = None
        self.weighed = False

    def __repr__(self) -> str:
        return f"Exchange({self.side.value} {self.method}, start_ns={self.start_ns}, end_ns={self.end_ns})"

    def finish(self, response: object = None, error_type: str | None = None) -> None:
        self.end_ns = time.time_ns()
        self.response = response
        self.error_type = error_type

    @property
    def duration_s(self) -> float:
        return max(0, (self.end_ns or time.time_ns()) - self.start_ns) / 1e9

    @property
    def charged_budget(self) -> BudgetRef | None:
        """The budget scope charged: only for operations whose tokens enter the context window."""
        return self.budget if self.method in BUDGETED_METHODS else None

    @property
    def request_kind(self) -> str | None:
        return REQUEST_KINDS.get(self.method)

    @property
    def response_kind(self) -> str | None:
        return RESPONSE_KINDS.get(self.method) if self.error_type is None or self.response else None
