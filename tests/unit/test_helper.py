"""The analysis helper process (helper.py), for real: started, fed, starved, killed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens import helper as helper_module
from opentelemetry.instrumentation.mcp_tokens.analyst import (
    ANSWER_WITHIN_S,
    MAX_BACKLOG_S,
    Analyst,
    AnalystStatus,
    Findings,
    Job,
)
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.exchange import IN_FLIGHT, Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.helper import (
    HELPER_MAX_WAIT_S,
    LinkClosed,
    ProcessLink,
    ReadAhead,
    ThreadLink,
    helper_command,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux scheduling and /proc")


def job(seq: int, method: str = "tools/call") -> Job:
    return Job(
        seq=seq,
        side=Side.SERVER,
        method=method,
        target="report" if method == "tools/call" else None,
        server_name="crm",
        error_type=None,
        budget=None,
        end_ns=time.time_ns(),
        request_kind=PayloadKind.TOOL_ARGUMENTS if method == "tools/call" else None,
        response_kind=PayloadKind.TOOL_RESULT if method == "tools/call" else PayloadKind.TOOL_LIST,
    )


def send(
    link: ProcessLink | ThreadLink, item: Job, request: object, response: object, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    for step in link.sender(item, request, response):
        if step is False:
            assert time.monotonic() < deadline, "the helper does not read its jobs"
            time.sleep(0.001)


def receive(
    link: ProcessLink | ThreadLink, count: int, timeout: float = 60
) -> list[Findings | AnalystStatus]:
    got: list[Findings | AnalystStatus] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {got!r} arrived"
        got.extend(link.receive())
        time.sleep(0.005)
    return got


@pytest.fixture
def link() -> Iterator[ProcessLink]:
    # A worker of an earlier test may have published "no idle CPU" for the helper.
    IN_FLIGHT.set_helper_share(1.0)
    opened = ProcessLink(Settings())
    try:
        yield opened
    finally:
        opened.close()


def test_the_helper_finds_what_the_analysis_on_a_thread_finds(link: ProcessLink) -> None:
    payloads = [
        (
            {"name": "report", "arguments": {"q": "west"}},
            {"content": [{"type": "text", "text": "rows " * 3000}]},
        ),
        (
            {"name": "report", "arguments": {}},
            {
                "content": [{"type": "text", "text": "\u200b" * 500 + "pad " * 800 + "z\ud800"}],
                "structuredContent": {"rows": [{"id": i, "v": "é" * 5} for i in range(300)]},
            },
        ),
        (None, {"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(50)]}),
    ]
    jobs = [job(1), job(2), job(3, "tools/list")]
    for item, (request, response) in zip(jobs, payloads, strict=True):
        send(link, item, request, response)
    messages = receive(link, 4)
    status = messages[0]
    assert isinstance(status, AnalystStatus) and status.exact and status.encoding == "o200k_base"
    assert link.started
    local = Analyst(Settings())
    local.start()
    expected = [
        local.analyse(item, request, response)
        for item, (request, response) in zip(jobs, payloads, strict=True)
    ]
    found = [m for m in messages if isinstance(m, Findings)]
    assert [f.seq for f in found] == [1, 2, 3]
    for got, want in zip(found, expected, strict=True):
        assert got.request == want.request and got.response == want.response
        assert got.definitions == want.definitions and got.admitted == want.admitted
    assert found[1].response is not None and {p.reason.value for p in found[1].response.padding} >= {
        "invisible"
    }


def test_a_large_payload_crosses_in_pieces_and_is_counted_exactly(link: ProcessLink, o200k) -> None:  # type: ignore[no-untyped-def]
    text = "".join(f"line {i}: value={i * 7}\n" for i in range(150_000))  # about 3 MB
    send(link, job(1), None, {"content": [{"type": "text", "text": text}]})
    [*_, findings] = receive(link, 2)
    assert isinstance(findings, Findings) and findings.response is not None
    assert findings.response.exact and findings.response.tokens == len(o200k.encode_ordinary(text))


@linux_only
def test_the_helper_runs_at_the_lowest_priority_in_a_session_of_its_own(link: ProcessLink) -> None:
    receive(link, 1)
    assert os.getpriority(os.PRIO_PROCESS, link.pid) == 19
    assert os.getsid(link.pid) == link.pid != os.getsid(0)


def test_the_helper_exits_when_its_stdin_closes(link: ProcessLink) -> None:
    receive(link, 1)
    pid = link.pid
    link.close()
    with pytest.raises(ProcessLookupError):
        for _ in range(200):
            os.kill(pid, 0)
            time.sleep(0.01)


def test_a_killed_helper_is_reported_as_closed(link: ProcessLink) -> None:
    receive(link, 1)
    os.kill(link.pid, 9)
    deadline = time.monotonic() + 10
    with pytest.raises(LinkClosed):
        while time.monotonic() < deadline:
            link.receive()
            time.sleep(0.01)
    with pytest.raises(LinkClosed):
        send(link, job(1), None, {"content": [{"type": "text", "text": "x" * (1 << 20)}]})


def test_the_helper_is_not_instrumented_by_what_the_parent_was_launched_with(tmp_path: Path) -> None:
    """opentelemetry-instrument puts a sitecustomize on PYTHONPATH; the helper must not run
    it (it would instrument the helper, which would start a helper...)."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from opentelemetry.instrumentation.mcp_tokens.config import Settings
        from opentelemetry.instrumentation.mcp_tokens.helper import ProcessLink
        print(os.getpid())
        link = ProcessLink(Settings())
        deadline = time.monotonic() + 60
        while not link.started and time.monotonic() < deadline:
            link.receive()
            time.sleep(0.01)
        print("started" if link.started else "not started")
        link.close()
        """
    )
    marks = tmp_path / "ran"
    (tmp_path / "sitecustomize.py").write_text(
        f"import os\nwith open({str(marks)!r}, 'a') as f:\n    f.write(str(os.getpid()) + '\\n')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    parent = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    pid, outcome = parent.stdout.split()
    assert outcome == "started", parent.stderr
    assert marks.read_text().split() == [pid]  # the parent ran it, the helper did not


def test_the_command_names_this_interpreter_and_this_path() -> None:
    command = helper_command()
    assert command[0] == sys.executable and command[1] == "-I"
    assert "auto_instrumentation" not in command[4]
    assert command[5] == "-" and helper_command(7)[5] == "7"  # no board / the board's descriptor


@linux_only
def test_the_helper_waits_while_a_call_of_the_application_is_in_flight(link: ProcessLink) -> None:
    assert isinstance(receive(link, 1)[0], AnalystStatus)
    call = Exchange(Side.CLIENT, "tools/call", target="slow")  # in flight from here
    try:
        send(link, job(1), None, {"content": [{"type": "text", "text": "word " * 200_000}]})
        time.sleep(0.4)  # well under HELPER_MAX_WAIT_S
        assert link.receive() == [], "the helper analysed while a call was in flight"
    finally:
        call.finish(None)
    [findings] = receive(link, 1, timeout=10)
    assert isinstance(findings, Findings) and findings.response is not None and findings.response.exact


@linux_only
def test_with_idle_cpu_the_helper_waits_at_most_its_bound_after_the_response(link: ProcessLink) -> None:
    assert isinstance(receive(link, 1)[0], AnalystStatus)
    IN_FLIGHT.set_helper_share(0.3)  # what the worker publishes on a machine with idle cores
    call = Exchange(Side.CLIENT, "tools/call", target="never-ends")
    text = {"content": [{"type": "text", "text": "word " * 200_000}]}
    try:
        started = time.monotonic()
        send(link, job(1), None, text)
        [findings] = receive(link, 1, timeout=10)
        assert isinstance(findings, Findings)
        assert HELPER_MAX_WAIT_S * 0.9 <= time.monotonic() - started < HELPER_MAX_WAIT_S * 4
        # Sustained load: an exchange already that old is analysed alongside the calls.
        old = replace(job(2), end_ns=time.time_ns() - int(2 * HELPER_MAX_WAIT_S * 1e9))
        started = time.monotonic()
        send(link, old, None, text)
        [findings] = receive(link, 1, timeout=10)
        assert isinstance(findings, Findings) and findings.seq == 2
        assert time.monotonic() - started < HELPER_MAX_WAIT_S * 0.9
    finally:
        call.finish(None)
        IN_FLIGHT.set_helper_share(1.0)


@linux_only
def test_without_idle_cpu_the_helper_waits_for_the_calls_to_pause(link: ProcessLink) -> None:
    assert isinstance(receive(link, 1)[0], AnalystStatus)
    IN_FLIGHT.set_helper_share(0.0)  # no idle core beside the application's calls
    call = Exchange(Side.CLIENT, "tools/call", target="goes-on")
    text = {"content": [{"type": "text", "text": "word " * 1_000}]}
    try:
        old = replace(job(1), end_ns=time.time_ns() - int(2 * HELPER_MAX_WAIT_S * 1e9))
        send(link, old, None, text)
        time.sleep(0.5)
        assert link.receive() == [], "the helper analysed beside calls on a machine without idle CPU"
        call.finish(None)
        [findings] = receive(link, 1, timeout=10)
        assert isinstance(findings, Findings) and findings.seq == 1
        # An exchange the worker has given up already is not analysed.
        given_up = replace(job(2), end_ns=time.time_ns() - int((ANSWER_WITHIN_S + 1) * 1e9))
        send(link, given_up, None, text)
        send(link, job(3), None, text)
        [findings] = receive(link, 1, timeout=10)
        assert isinstance(findings, Findings) and findings.seq == 3
    finally:
        call.finish(None)
        IN_FLIGHT.set_helper_share(1.0)


def test_the_helper_exits_when_the_instrumented_process_dies() -> None:
    script = textwrap.dedent(
        """
        import os, sys, time
        from opentelemetry.instrumentation.mcp_tokens.config import Settings
        from opentelemetry.instrumentation.mcp_tokens.helper import ProcessLink
        link = ProcessLink(Settings())
        print(link.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        helper_pid = int(parent.stdout.readline())
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(helper_pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        pytest.fail("the helper outlived the process that started it")
    finally:
        parent.kill()


def test_the_thread_link_answers_like_the_helper() -> None:
    link = ThreadLink(Settings())
    try:
        send(
            link,
            job(5),
            {"name": "report", "arguments": {}},
            {"content": [{"type": "text", "text": "hello"}]},
        )
        messages = receive(link, 2)
        assert isinstance(messages[0], AnalystStatus)
        findings = messages[1]
        assert isinstance(findings, Findings) and findings.seq == 5
        assert findings.response is not None and findings.response.exact
    finally:
        link.close()


@linux_only
def test_held_exchanges_wait_for_quiet_even_beside_idle_cpu_and_are_counted_exactly(
    link: ProcessLink,
) -> None:
    assert isinstance(receive(link, 1)[0], AnalystStatus)
    IN_FLIGHT.set_helper_share(0.3)  # idle CPU: only the worker's `hold` keeps it waiting
    call = Exchange(Side.CLIENT, "tools/call", target="goes-on")
    # Together more than the pipe holds: the helper reads them ahead while it waits.
    text = {"content": [{"type": "text", "text": "word " * 100_000}]}
    ended_ns = time.time_ns() - int((MAX_BACKLOG_S + 1) * 1e9)
    try:
        for seq in range(1, 9):
            send(link, replace(job(seq), end_ns=ended_ns, hold=True), None, text, timeout=10)
        time.sleep(0.3)
        assert link.receive() == [], "the helper analysed a held exchange beside calls"
    finally:
        call.finish(None)
        IN_FLIGHT.set_helper_share(1.0)
    found = receive(link, 8, timeout=30)
    assert [f.seq for f in found if isinstance(f, Findings)] == list(range(1, 9))
    for findings in found:
        assert isinstance(findings, Findings) and findings.response is not None
        assert findings.response.exact and not findings.backlog


def test_the_read_ahead_stops_at_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helper_module, "HOLD_JOBS", 3)
    monkeypatch.setattr(helper_module, "HOLD_BYTES", 1000)
    reads: list[int] = []

    def read() -> tuple[Job, object, object, int] | None:
        if len(reads) == 10:
            return None
        reads.append(len(reads))
        return job(len(reads)), None, None, 400

    ahead = ReadAhead(read)
    time.sleep(0.2)
    assert len(reads) == 3  # 1200 bytes held: past HOLD_BYTES
    taken = ahead.take()
    assert taken is not None and taken[0].seq == 1
    time.sleep(0.2)
    assert len(reads) == 4
    seqs = [1]
    while (taken := ahead.take()) is not None:
        seqs.append(taken[0].seq)
    assert seqs == list(range(1, 11))


def test_the_read_ahead_hands_on_what_the_reading_raised_after_what_it_read() -> None:
    entries: deque[tuple[Job, object, object, int]] = deque([(job(1), None, None, 10)])

    def read() -> tuple[Job, object, object, int] | None:
        if entries:
            return entries.popleft()
        raise ValueError("a frame that is not a job")

    ahead = ReadAhead(read)
    taken = ahead.take()
    assert taken is not None and taken[0].seq == 1
    with pytest.raises(ValueError, match="not a job"):
        ahead.take()
