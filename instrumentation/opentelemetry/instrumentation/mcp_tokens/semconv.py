# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Attribute and metric names, units and bucket boundaries: the telemetry contract.

The MCP semantic conventions (status Development) moved to the GenAI repository and the
released `opentelemetry-semantic-conventions` package marks its MCP constants deprecated
and gives no bucket advice, so the names we rely on are pinned here. Every name below is
documented in docs/telemetry.md, with its Prometheus form; dashboards and alerts use it.
"""

from __future__ import annotations

from typing import Final

# --- MCP / GenAI semantic-convention attributes -------------------------------------------
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL_NAME: Final = "network.protocol.name"
NETWORK_PROTOCOL_VERSION: Final = "network.protocol.version"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
CLIENT_ADDRESS: Final = "client.address"
CLIENT_PORT: Final = "client.port"

GEN_AI_OPERATION_EXECUTE_TOOL: Final = "execute_tool"
ERROR_TYPE_TOOL_ERROR: Final = "tool_error"
OTHER_VALUE: Final = "_OTHER"


def target_attribute(method: str) -> str:
    """The attribute that names an operation's target: the prompt for prompts/*, else the tool."""
    return GEN_AI_PROMPT_NAME if method.startswith("prompts/") else GEN_AI_TOOL_NAME


# --- mcp-tokens span attributes -----------------------------------------------------------
TOKENS_REQUEST: Final = "mcp_tokens.request"
TOKENS_RESPONSE: Final = "mcp_tokens.response"
TOKENS_ENCODING: Final = "mcp_tokens.encoding"
TOKENS_EXACT: Final = "mcp_tokens.exact"
TOKENS_OVERHEAD: Final = "mcp_tokens.overhead"
TOKENS_OVERHEAD_RATIO: Final = "mcp_tokens.overhead_ratio"
TOKENS_RISK: Final = "mcp_tokens.risk"
BUDGET_SCOPE: Final = "mcp_tokens.budget.scope"
BUDGET_USED: Final = "mcp_tokens.budget.used"
BUDGET_UTILIZATION: Final = "mcp_tokens.budget.utilization"
BUDGET_LEVEL: Final = "mcp_tokens.budget.level"
TOKENS_SKIPPED: Final = "mcp_tokens.skipped"

# The guard (opt-in): what it did to a result, on the operation's span and an event.
GUARD_EVENT: Final = "mcp_tokens.guard"
GUARD_LIMIT: Final = "mcp_tokens.guard.limit"
GUARD_ORIGINAL_TOKENS: Final = "mcp_tokens.guard.original_tokens"
GUARD_ORIGINAL_EXACT: Final = "mcp_tokens.guard.original_exact"
GUARD_DELIVERED_TOKENS: Final = "mcp_tokens.guard.delivered_tokens"

PADDING_EVENT: Final = "mcp_tokens.padding"
PADDING_REASON: Final = "mcp_tokens.padding.reason"
PADDING_OFFSET: Final = "mcp_tokens.padding.offset"
PADDING_SCORE: Final = "mcp_tokens.padding.score"
PADDING_BLOCK: Final = "mcp_tokens.padding.block"

# --- mcp-tokens metric attributes ---------------------------------------------------------
SIDE: Final = "mcp_tokens.side"
DIRECTION: Final = "mcp_tokens.direction"
SERVER_NAME: Final = "mcp_tokens.server.name"
OVERHEAD_KIND: Final = "mcp_tokens.overhead.kind"
SKIP_REASON: Final = "mcp_tokens.skip.reason"
# Values of SKIP_REASON: why a payload was estimated instead of counted exactly.
SKIP_OVERLOAD: Final = "overload"  # from its length: the queue for the counter was full
SKIP_BACKLOG: Final = "backlog"  # content-aware: exact counting had fallen behind
SKIP_OVER_MAX_BYTES: Final = "over_max_bytes"  # content-aware: larger than MAX_BYTES
SKIP_NO_TOKENIZER: Final = "no_exact_tokenizer"  # content-aware: the exact tokenizer did not load
SKIP_ERROR: Final = "analysis_error"  # from its length: the analysis failed, or its service went away
SKIP_SHUTDOWN: Final = "shutdown"  # from its length: not counted when the instrumentation stopped
# On spans only (TOKENS_SKIPPED): the span ended with an estimate before the exact count came
# back, which still reaches the metrics.
SPAN_LATE: Final = "late"

GUARD_ACTION: Final = "mcp_tokens.guard.action"
GUARD_REASON: Final = "mcp_tokens.guard.reason"
GUARD_FAILURE: Final = "mcp_tokens.guard.failure"
# Values of GUARD_ACTION, GUARD_REASON and GUARD_FAILURE.
GUARD_TRUNCATED: Final = "truncated"
GUARD_REJECTED: Final = "rejected"
GUARD_WARNED: Final = "warned"
GUARD_REASON_RESULT_LIMIT: Final = "result_limit"
GUARD_REASON_BUDGET: Final = "budget"
GUARD_REASON_REPEAT: Final = "repeat"
GUARD_FAILURE_ERROR: Final = "error"  # the guard raised: the original result was delivered
GUARD_FAILURE_NO_TOKENIZER: Final = "no_exact_tokenizer"  # no exact tiktoken tokenizer (yet)

# Host limits (engine/hosts.py): which host, and which of its limits a response crossed.
HOST: Final = "mcp_tokens.host"
HOST_LIMIT: Final = "mcp_tokens.host.limit"  # tokens, bytes, lines, chars

SIDE_CLIENT: Final = "client"
SIDE_SERVER: Final = "server"
DIRECTION_REQUEST: Final = "request"
DIRECTION_RESPONSE: Final = "response"

# W3C baggage entry that carries the budget scope from an agent to the servers it calls.
BAGGAGE_BUDGET_SCOPE: Final = "mcp_tokens.budget.scope"
# and the context window that scope was given, so a server's utilisation uses the agent's window.
BAGGAGE_BUDGET_CONTEXT_WINDOW: Final = "mcp_tokens.budget.context_window"

# --- metrics ------------------------------------------------------------------------------
CLIENT_OPERATION_DURATION: Final = "mcp.client.operation.duration"
SERVER_OPERATION_DURATION: Final = "mcp.server.operation.duration"
CLIENT_SESSION_DURATION: Final = "mcp.client.session.duration"
SERVER_SESSION_DURATION: Final = "mcp.server.session.duration"
PAYLOAD: Final = "mcp_tokens.payload"
OVERHEAD: Final = "mcp_tokens.overhead"
RESPONSES: Final = "mcp_tokens.responses"
TOOL_DEFINITION: Final = "mcp_tokens.tool.definition"
BUDGET_UTILIZATION_METRIC: Final = "mcp_tokens.budget.utilization"
BUDGET_CROSSINGS: Final = "mcp_tokens.budget.crossings"
PADDING_DETECTIONS: Final = "mcp_tokens.padding.detections"
ANALYSIS_DURATION: Final = "mcp_tokens.analysis.duration"
ANALYSIS_SKIPPED: Final = "mcp_tokens.analysis.skipped"
GUARD_ACTIONS: Final = "mcp_tokens.guard.actions"
GUARD_REMOVED: Final = "mcp_tokens.guard.removed"
GUARD_FAILURES: Final = "mcp_tokens.guard.failures"
HOST_OVER_LIMIT: Final = "mcp_tokens.host.over_limit"
TOOLS: Final = "mcp_tokens.tools"

# The largest tool result, in tokens, that hosts accept by default (Claude Code's
# MAX_MCP_OUTPUT_TOKENS; a larger one is refused): the guard's default limit, the CLI's and
# the dashboards' default cap, and a bound of TOKEN_BUCKETS.
HOST_RESULT_CAP: Final = 25000

# Semconv MCP duration advice (model/mcp/metrics.yaml), in seconds.
DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
# Powers of four like gen_ai.client.token.usage, plus the default risk thresholds (1000,
# 4000, 8000) so `le` buckets answer "how many responses were above high/critical", and
# HOST_RESULT_CAP, so a query counts exactly the responses such a host refuses.
TOKEN_BUCKETS: Final = (
    1,
    4,
    16,
    64,
    256,
    1000,
    1024,
    4000,
    4096,
    8000,
    16384,
    HOST_RESULT_CAP,
    65536,
    262144,
    1048576,
)
UTILIZATION_BUCKETS: Final = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.5)
# The instrumentation's own cost: microseconds to seconds.
ANALYSIS_BUCKETS: Final = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5)
