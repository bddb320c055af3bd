# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens top` against local HTTP endpoints serving Prometheus text: the table, rates
between scrapes, Ctrl-C, and every way a hostile or absent endpoint fails (one line, its code)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.exporter.mcp_tokens.cli import top
from opentelemetry.exporter.mcp_tokens.cli.errors import CliError, ExitCode
from opentelemetry.exporter.mcp_tokens.report.prometheus import snapshot_from_text

from tests.unit.test_report_economics import exposition
from tests.unit.test_report_host_cap import exposition as over_cap_exposition

from .conftest import CliRunner

LABELS = (
    'gen_ai_tool_name="{tool}",mcp_method_name="tools/call",mcp_tokens_direction="response",'
    'mcp_tokens_encoding="o200k_base",mcp_tokens_server_name="shop",mcp_tokens_side="server"'
)


def page(calls: int, tokens: float, tool: str = "search") -> str:
    """The exporter's text for one tool: `calls` responses of tokens/calls each, all in (256, 1000]."""
    labels = LABELS.format(tool=tool)
    buckets = "\n".join(
        f'mcp_tokens_payload_bucket{{{labels},le="{le}"}} {0 if float(le) < 1000 else calls}'
        for le in ("256.0", "1000.0", "+Inf")
    )
    return f"""# HELP mcp_tokens_payload Tokens
# TYPE mcp_tokens_payload histogram
{buckets}
mcp_tokens_payload_count{{{labels}}} {calls}
mcp_tokens_payload_sum{{{labels}}} {tokens}
# TYPE mcp_tokens_responses_total counter
mcp_tokens_responses_total{{{labels},mcp_tokens_risk="low",job="a"}} {calls}
# TYPE mcp_tokens_overhead_total counter
mcp_tokens_overhead_total{{{labels},mcp_tokens_overhead_kind="formatting"}} {tokens / 4}
# TYPE mcp_tokens_budget_utilization histogram
mcp_tokens_budget_utilization_bucket{{mcp_tokens_server_name="shop",mcp_tokens_side="server",le="0.5"}} 1
mcp_tokens_budget_utilization_bucket{{mcp_tokens_server_name="shop",mcp_tokens_side="server",le="0.75"}} 2
mcp_tokens_budget_utilization_bucket{{mcp_tokens_server_name="shop",mcp_tokens_side="server",le="+Inf"}} 2
mcp_tokens_budget_utilization_count{{mcp_tokens_server_name="shop",mcp_tokens_side="server"}} 2
mcp_tokens_budget_utilization_sum{{mcp_tokens_server_name="shop",mcp_tokens_side="server"}} 1.0
"""


class Endpoint:
    """An HTTP server on 127.0.0.1 whose answers the test sets: one body per request, in order."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers = answers
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = owner.answers[min(owner.requests, len(owner.answers) - 1)]
                owner.requests += 1
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Callable[[list[tuple[int, bytes]]], Endpoint]]:
    started: list[Endpoint] = []

    def start(answers: list[tuple[int, bytes]]) -> Endpoint:
        started.append(Endpoint(answers).__enter__())
        return started[-1]

    yield start
    for server in started:
        server.__exit__()


def _table_row(out: str, tool: str) -> list[str]:
    line = next(line for line in out.splitlines() if f" {tool} " in line)
    return line.split()


def test_once_prints_totals_per_tool(run_cli: CliRunner, endpoint: Callable[..., Endpoint]) -> None:
    server = endpoint([(200, page(4, 2000).encode())])
    run = run_cli("top", "--once", server.url)
    assert run.code == 0, run.err
    # Side Server Operation Tool  Tokens/s Calls Tokens Max  Risk  Overhead Padding
    assert _table_row(run.out, "search") == [
        "server", "shop", "tools/call", "search", "—", "4", "2,000", "≤1,000", "low", "4", "25.0%", "—",
    ]  # fmt: skip
    assert "budget server shop: 2 observations, peak ≤75.0%, p95≈" in run.out
    assert server.requests == 1


def test_rates_come_from_successive_scrapes() -> None:
    first = top.Frame(top.build_report(snapshot_from_text(page(4, 2000))), at=10.0, series=0)
    second = top.Frame(top.build_report(snapshot_from_text(page(10, 5000))), at=12.0, series=0)
    rates = top._rates(first, second)
    assert rates == {("server", "shop", "tools/call", "search"): (1500.0, 3.0)}  # tokens/s, calls/s
    # A restarted process starts its counters again: its rate is what it has done since.
    restarted = top.Frame(top.build_report(snapshot_from_text(page(1, 100))), at=14.0, series=0)
    assert top._rates(second, restarted) == {("server", "shop", "tools/call", "search"): (50.0, 0.5)}


def test_live_view_refreshes_until_ctrl_c_then_exits_zero(
    run_cli: CliRunner, endpoint: Callable[..., Endpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = endpoint([(200, page(4, 2000).encode()), (200, page(10, 5000).encode()), (500, b"oops")])
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:  # the user presses Ctrl-C during the third wait
            raise KeyboardInterrupt

    monkeypatch.setattr(top.time, "sleep", sleep)
    run = run_cli("top", "--interval", "0.5", server.url)
    assert run.code == 0 and run.err == ""
    assert sleeps == [0.5, 0.5, 0.5] and server.requests == 3
    # The last frame drawn kept the good scrape and said the next one failed.
    assert "last scrape failed" in run.out and "HTTP 500" in run.out
    assert "Traceback" not in run.out + run.err


def test_rows_are_bounded(run_cli: CliRunner, endpoint: Callable[..., Endpoint]) -> None:
    text = "".join(page(i + 1, 100.0 * (i + 1), tool=f"tool{i:02d}") for i in range(30))
    run = run_cli("top", "--once", "--rows", "5", endpoint([(200, text.encode())]).url)
    assert run.code == 0, run.err
    assert sum(1 for line in run.out.splitlines() if " tools/call " in line) == 5
    assert "+25 more rows (--rows)" in run.out
    assert _table_row(run.out, "tool29")[6] == "3,000"  # busiest first


@pytest.mark.parametrize(
    ("answers", "code", "message"),
    [
        ([(404, b"no")], ExitCode.METRICS_UNREACHABLE, "HTTP 404"),
        ([(200, b"\xff\xfe not text")], ExitCode.METRICS_MALFORMED, "not UTF-8"),
        ([(200, b'metric{label="unterminated 1\n')], ExitCode.METRICS_MALFORMED, "not Prometheus text"),
        ([(200, b"# " + b"x" * 5000)], ExitCode.METRICS_MALFORMED, "more than 4,096 bytes"),
    ],
)
def test_bad_endpoints_fail_in_one_line(
    run_cli: CliRunner,
    endpoint: Callable[..., Endpoint],
    answers: list[tuple[int, bytes]],
    code: ExitCode,
    message: str,
) -> None:
    run = run_cli("top", "--once", "--max-bytes", "4096", endpoint(answers).url)
    assert run.code == int(code)
    assert run.err.startswith("mcp-tokens: error: ") and message in run.err
    assert len(run.err.strip().splitlines()) == 1 and run.out == ""


def test_unreachable_and_non_http_urls(run_cli: CliRunner) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]
    run = run_cli("top", "--once", f"http://user:secret@127.0.0.1:{port}/metrics")
    assert run.code == int(ExitCode.METRICS_UNREACHABLE) and "unreachable" in run.err
    assert "secret" not in run.err
    run = run_cli("top", "--once", "file:///etc/passwd")
    assert run.code == int(ExitCode.USAGE) and "http(s) URL" in run.err


def test_credentials_become_a_basic_authorization_header() -> None:
    url, headers = top._request("http://user:pa%20ss@127.0.0.1:9464/metrics")
    assert url == "http://127.0.0.1:9464/metrics"
    assert headers["Authorization"] == "Basic dXNlcjpwYSUyMHNz"
    with pytest.raises(CliError):
        top._request("ftp://127.0.0.1/metrics")


def test_once_shows_tools_never_called_and_cost_at_a_price(
    run_cli: CliRunner, endpoint: Callable[..., Endpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "180")  # the cost column needs a wider terminal than the suite's

    server = endpoint([(200, exposition(side="server").encode())])
    run = run_cli("top", "--once", "--price-per-mtok", "3", "--currency", "EUR", server.url)
    assert run.code == 0, run.err
    text = " ".join(run.out.split())
    assert (
        "Tools listed but never called (server, crm): 8 of 12, 984 of 1,473 definition tokens (67%)" in text
    )
    # responses 10,000 tokens at 3 EUR per million; the listing of 1,473 tokens per conversation.
    assert (
        "responses 0.0300 EUR · definitions 0.00442 EUR per conversation, 0.00295 EUR of it never called"
        in text
    )
    assert "Cost" in run.out and "0.00240 EUR" in text  # get: 800 tokens


def test_price_comes_from_the_report_setting_when_no_flag_is_given(
    run_cli: CliRunner, endpoint: Callable[..., Endpoint], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_MCP_TOKENS_REPORT_PRICE_PER_MTOK", "3")
    run = run_cli("top", "--once", endpoint([(200, exposition().encode())]).url)
    assert "at 3 USD per million input tokens" in " ".join(run.out.split())
    bad = run_cli("top", "--once", "--price-per-mtok", "-2", endpoint([(200, b"")]).url)
    assert bad.code == 2


def test_once_counts_the_responses_hosts_would_refuse(
    run_cli: CliRunner, endpoint: Callable[..., Endpoint]
) -> None:
    server = endpoint([(200, over_cap_exposition().encode())])
    run = run_cli("top", "--once", server.url)
    assert run.code == 0, run.err
    text = " ".join(run.out.split())
    sentence = "3 responses over 25,000 tokens (git_diff 2 of 5, resources/read 1 of 1)"
    assert f"Responses hosts would refuse: {sentence}" in text
    higher = " ".join(run_cli("top", "--once", "--host-cap", "262144", server.url).out.split())
    assert "Responses hosts would refuse: no response over 262,144 tokens" in higher
    off = run_cli("top", "--once", "--host-cap", "0", server.url)
    assert off.code == 0 and "hosts would refuse" not in off.out
    assert run_cli("top", "--once", "--host-cap", "-1", server.url).code == 2
