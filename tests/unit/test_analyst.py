# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The analysis side (analyst.py): findings from jobs, estimates when behind, labels, content."""

from __future__ import annotations

import pickle
import time
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters, Job, job_of
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.exchange import REQUEST_KINDS, RESPONSE_KINDS, Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef

TEXT = "The quarterly report lists revenue by region and product line. " * 40


def job(seq: int = 1, *, method: str = "tools/call", ended_ago_s: float = 0.0, **fields: Any) -> Job:
    values: dict[str, Any] = {
        "seq": seq,
        "side": semconv.SIDE_SERVER,
        "method": method,
        "target": "report" if method == "tools/call" else None,
        "server_name": "crm",
        "error_type": None,
        "end_ns": time.time_ns() - int(ended_ago_s * 1e9),
        "request_kind": PayloadKind.TOOL_ARGUMENTS if method == "tools/call" else None,
        "response_kind": {"tools/call": PayloadKind.TOOL_RESULT, "tools/list": PayloadKind.TOOL_LIST}[method],
    }
    values.update(fields)
    return Job(**values)


def result(text: str = TEXT) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@pytest.fixture(scope="module")
def ready(counters: Counters) -> Analyst:
    return Analyst(Settings(), counters)


def test_an_exchange_whose_client_is_behind_is_estimated(ready: Analyst, o200k: Any) -> None:
    fresh = ready.analyse(job(1), None, result())
    pushed = ready.analyse(job(2, behind=True), None, result())
    exact = len(o200k.encode_ordinary(TEXT))
    assert fresh.response is not None and fresh.response.exact and fresh.response.tokens == exact
    assert not fresh.backlog
    assert pushed.backlog and pushed.response is not None
    assert pushed.response.encoding == "estimate" and not pushed.response.exact
    assert pushed.response.tokens == pytest.approx(exact, rel=0.25)  # the estimate's bound for prose


def test_every_client_of_a_process_counts_with_its_one_tokenizer(counters: Counters) -> None:
    first, second = Analyst(Settings(), counters), Analyst(Settings(max_bytes=1000), counters)
    assert first.status is second.status is counters.status
    assert counters.exact(Settings().max_bytes) is counters.exact(Settings().max_bytes)
    big = second.analyse(job(1), None, result("word " * 1000))
    assert big.response is not None and not big.response.exact  # its own MAX_BYTES
    assert first.analyse(job(1), None, result("word " * 1000)).response.exact  # type: ignore[union-attr]


def test_replaying_the_admissions_folds_every_name_alike(ready: Analyst) -> None:
    listing = {"tools": [{"name": f"tool_{i}", "inputSchema": {"type": "object"}} for i in range(250)]}
    findings = [
        ready.analyse(job(1, method="tools/list", server_name="alpha"), None, listing),
        ready.analyse(job(2, target="tool_7", server_name="alpha"), None, result("x")),
        ready.analyse(job(3, target="not_listed", server_name="beta"), None, result("x")),
        ready.analyse(
            job(4, target="failed", server_name="beta", error_type="tool_error"), None, result("x")
        ),
    ]
    mirror = ServerLabels(Settings().max_label_values)
    for found in findings:
        mirror.replay(found.admitted)
    for name in ("tool_0", "tool_199", "tool_200", "tool_249", "not_listed", "failed", None):
        for server in ("alpha", "beta"):
            label = mirror.fold_server(server)
            assert label == ready.labels.fold_server(server)
            assert mirror.targets(label).fold(name) == ready.labels.targets(label).fold(name)
    # A listing's definitions fold into at most one entry per label value.
    definitions = findings[0].definitions
    assert definitions is not None and len(definitions) == 201
    assert definitions[semconv.OTHER_VALUE] > 0


def test_findings_stay_small_whatever_the_payload(ready: Analyst) -> None:
    listing = {"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(20_000)]}
    findings = ready.analyse(job(1, method="tools/list", server_name="huge"), None, listing)
    assert findings.response is not None and findings.response.blocks == ()
    assert findings.response.block_count == 20_000
    assert len(pickle.dumps(findings)) < 20_000


def test_budget_scopes_are_charged_per_side(ready: Analyst) -> None:
    scope = {"budget_key": "conversation-7", "context_window": 10_000}
    first = ready.analyse(job(1, **scope), {"name": "report", "arguments": {}}, result())
    second = ready.analyse(job(2, **scope), {"name": "report", "arguments": {}}, result())
    client = ready.analyse(job(3, side=semconv.SIDE_CLIENT, **scope), None, result())
    assert first.budget is not None and second.budget is not None and client.budget is not None
    assert second.budget.used == 2 * first.budget.used
    assert client.budget.used < first.budget.used  # the client side has its own ledger


def test_a_job_holds_plain_values_and_only_budgeted_operations_carry_their_scope() -> None:
    call = Exchange(Side.CLIENT, "tools/call", target="t", budget=BudgetRef("c-1", 8_000))
    call.finish({"content": []})
    sampling = Exchange(Side.CLIENT, "sampling/createMessage", budget=BudgetRef("c-1", 8_000))
    sampling.finish({"content": {"type": "text", "text": "x"}})
    job = job_of(call, 4)
    assert (job.side, job.budget_key, job.context_window) == ("client", "c-1", 8_000)
    assert type(job.side) is str  # the counting service unpickles it without the exchange module
    assert (job.request_kind, job.response_kind) == (PayloadKind.TOOL_ARGUMENTS, PayloadKind.TOOL_RESULT)
    assert job_of(sampling, 5).budget_key is None  # a separate model call: not charged


def test_the_exchange_tables_name_payload_kinds_of_the_engine() -> None:
    assert {PayloadKind(kind) for kind in (*REQUEST_KINDS.values(), *RESPONSE_KINDS.values())} <= set(
        PayloadKind
    )


def test_content_is_captured_only_when_asked_and_cut(counters: Counters) -> None:
    off = Analyst(Settings(), counters)
    on = Analyst(Settings(capture_content=True, content_max_chars=40), counters)
    request = {"name": "report", "arguments": {"region": "west\ud800"}}
    assert off.analyse(job(1), request, result()).content == (None, None)
    arguments, response = on.analyse(job(1), request, result()).content
    assert arguments == '{"name":"report","arguments":{"region":"west?"}}'[:40]
    assert response is not None and len(response) == 40
    listing = on.analyse(job(2, method="tools/list"), None, {"tools": []})
    assert listing.content == (None, None)  # only tool calls carry content


def test_an_analysis_that_fails_says_so_instead_of_raising(
    ready: Analyst, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ours")

    monkeypatch.setattr(ready, "_charge_budget", broken)
    findings = ready.analyse(job(9), None, result())
    assert findings.error == "RuntimeError" and findings.seq == 9
    assert findings.server == "crm" and findings.response is None


def test_servers_folded_into_one_label_add_their_listings_up(counters: Counters) -> None:
    analyst = Analyst(Settings(), counters)

    def listing(server: int, tools: int = 3) -> dict[str, Any]:
        return {
            "tools": [{"name": f"s{server}_t{i}", "description": "d" * (server + i)} for i in range(tools)]
        }

    totals = {}
    for server in range(55):  # 50 server names get a label of their own
        findings = analyst.analyse(
            job(server, method="tools/list", server_name=f"srv{server}"), None, listing(server)
        )
        assert findings.response is not None and findings.definitions is not None
        totals[server] = findings.response.tokens
    assert findings.server == semconv.OTHER_VALUE
    assert sum(findings.definitions.values()) == sum(totals[s] for s in range(50, 55))
    # A folded server that lists again replaces its own share, not the others'.
    again = analyst.analyse(job(99, method="tools/list", server_name="srv52"), None, listing(52, tools=1))
    assert again.response is not None and again.definitions is not None
    assert sum(again.definitions.values()) == sum(totals[s] for s in (50, 51, 53, 54)) + again.response.tokens
    # The other side keeps its own.
    client = analyst.analyse(
        job(100, method="tools/list", server_name="srv53", side=semconv.SIDE_CLIENT), None, listing(53)
    )
    assert client.definitions is not None and sum(client.definitions.values()) == totals[53]
