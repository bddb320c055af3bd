# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instrumentor's start: what instrument() takes, and what it leaves for later."""

from __future__ import annotations

import logging

import mcp  # noqa: F401 -- an MCP application: the SDK is imported before instrument()
import pytest
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider


def test_the_providers_are_not_taken_for_settings_and_no_analysis_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    instrumentor = McpTokensInstrumentor()
    with caplog.at_level(logging.WARNING, logger="opentelemetry.instrumentation.mcp_tokens"):
        instrumentor.instrument(
            tracer_provider=TracerProvider(), meter_provider=MeterProvider(), queue_size=7
        )
    try:
        assert caplog.records == []
        pipeline = instrumentor.pipeline
        assert pipeline is not None and pipeline.settings.queue_size == 7
        assert pipeline.worker._thread is None  # started by the first exchange
    finally:
        instrumentor.uninstrument()
    assert instrumentor.pipeline is None
