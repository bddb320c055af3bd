# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the mcp 1.x request handlers share, on the sending side (`v1_client`) and the
receiving side (`v1_server`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.trace import Tracer

from .v1_sessions import SessionTracker

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard


class RequestHandlers:
    """The pipeline exchanges go to, the tracer of the spans, the SDK's classes (`v1_sdk`),
    the sessions, whether the patcher is still on (a call already inside a handler when
    `unpatch()` runs finishes without recording), and the guard, if one is on."""

    def __init__(
        self,
        pipeline: Pipeline,
        tracer: Tracer,
        sdk: Any,
        sessions: SessionTracker,
        is_on: Callable[[], bool],
        *,
        guard: Guard | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._tracer = tracer
        self._sdk = sdk
        self._sessions = sessions
        self._is_on = is_on
        self._guard = guard
