# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A test server over stdio, instrumented by mcp-tokens, that dumps its telemetry on exit.

`test_v2_stdio.py` launches it through a generated executable (the `python` of a stdio
`Target`): `<wrapper> -m tests.integration.apps.<flavour>_server --transport stdio`. When
the client closes stdin the server returns; the spans and metrics its process recorded are
then written as JSON to `$MCP_TOKENS_V2_DUMP`.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

DUMP_ENV = "MCP_TOKENS_V2_DUMP"


def span_record(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "kind": span.kind.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
        "trace_id": span.context.trace_id,
        "span_id": span.context.span_id,
        "parent_span_id": span.parent.span_id if span.parent else None,
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
    }


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] != "-m":
        raise SystemExit(f"usage: {sys.argv[0]} -m MODULE [ARGS...]")
    module, arguments = sys.argv[2], sys.argv[3:]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])

    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=meter_provider)
    sys.argv = [module, *arguments]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        instrumentor.pipeline.force_flush(10.0)
        dump = {
            "spans": [span_record(s) for s in exporter.get_finished_spans()],
            "metrics": json.loads(reader.get_metrics_data().to_json()),  # type: ignore[union-attr]
        }
        path = os.environ[DUMP_ENV]
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(dump, handle)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
