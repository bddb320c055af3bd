# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The analysis helper process (helper.py, helper_link.py), for real: started, fed,
starved, killed; and the analysis on the worker's thread (thread_link.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Findings, job_of
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.helper_link import ProcessLink, helper_command
from opentelemetry.instrumentation.mcp_tokens.link import LinkClosed
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing
from opentelemetry.instrumentation.mcp_tokens.thread_link import ThreadLink

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux scheduling and /proc")

# Idle CPU beside calls whatever the machine's load (fewer than no cores kept free).
ALWAYS_IDLE = Pacing(keep_free_cores=-1.0)


def exchange(
    request: object, response: object, method: str = "tools/call", ended_ago_s: float = 0.0
) -> Exchange:
    item = Exchange(
        Side.SERVER, method, target="report" if method == "tools/call" else None, server_name="crm"
    )
    item.request = request
    item.finish(response)
    item.end_ns -= int(ended_ago_s * 1e9)
    return item


def text_result(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}]}


def send(link: ProcessLink | ThreadLink, item: Exchange, seq: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    for step in link.sender(item, seq, False):
        if step is False:
            assert time.monotonic() < deadline, "the helper does not read its jobs"
            time.sleep(0.001)
    link.flush()


def receive(link: ProcessLink | ThreadLink, count: int, timeout: float = 60) -> list[Findings]:
    got: list[Findings] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {got!r} arrived"
        got.extend(link.receive())
        time.sleep(0.005)
    return got


def wait_until_ready(link: ProcessLink | ThreadLink, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while link.status is None:
        assert time.monotonic() < deadline, "the analysis never reported ready"
        link.receive()
        link.wait(0.05)


@pytest.fixture
def link() -> Iterator[ProcessLink]:
    opened = ProcessLink(Settings(), ALWAYS_IDLE)
    try:
        yield opened
    finally:
        opened.close()


def test_the_helper_finds_what_the_analysis_on_a_thread_finds(link: ProcessLink) -> None:
    exchanges = [
        exchange({"name": "report", "arguments": {"q": "west"}}, text_result("rows " * 3000)),
        exchange(
            {"name": "report", "arguments": {}},
            {
                "content": [{"type": "text", "text": "\u200b" * 500 + "pad " * 800 + "z\ud800"}],
                "structuredContent": {"rows": [{"id": i, "v": "é" * 5} for i in range(300)]},
            },
        ),
        exchange(
            None,
            {"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(50)]},
            "tools/list",
        ),
    ]
    local = Analyst(Settings())
    local.start()
    expected = [
        local.analyse(job_of(item, seq), item.request, item.response) for seq, item in enumerate(exchanges, 1)
    ]
    for seq, item in enumerate(exchanges, 1):
        send(link, item, seq)
    found = receive(link, 3)
    assert link.status is not None and link.status.exact and link.status.encoding == "o200k_base"
    assert [f.seq for f in found] == [1, 2, 3]
    for got, want in zip(found, expected, strict=True):
        assert got.request == want.request and got.response == want.response
        assert got.definitions == want.definitions and got.admitted == want.admitted
    assert found[1].response is not None and {p.reason.value for p in found[1].response.padding} >= {
        "invisible"
    }


def test_a_large_payload_crosses_in_pieces_and_is_counted_exactly(link: ProcessLink, o200k) -> None:  # type: ignore[no-untyped-def]
    text = "".join(f"line {i}: value={i * 7}\n" for i in range(150_000))  # about 3 MB
    send(link, exchange(None, text_result(text)), 1)
    [findings] = receive(link, 1)
    assert findings.response is not None
    assert findings.response.exact and findings.response.tokens == len(o200k.encode_ordinary(text))


@linux_only
def test_the_helper_runs_at_the_lowest_priority_in_a_session_of_its_own(link: ProcessLink) -> None:
    wait_until_ready(link)
    assert os.getpriority(os.PRIO_PROCESS, link.pid) == 19
    assert os.getsid(link.pid) == link.pid != os.getsid(0)


def test_the_helper_exits_when_its_stdin_closes(link: ProcessLink) -> None:
    wait_until_ready(link)
    pid = link.pid
    link.close()
    with pytest.raises(ProcessLookupError):
        for _ in range(200):
            os.kill(pid, 0)
            time.sleep(0.01)


def test_a_killed_helper_is_reported_as_closed(link: ProcessLink) -> None:
    wait_until_ready(link)
    os.kill(link.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    with pytest.raises(LinkClosed):
        while time.monotonic() < deadline:
            link.receive()
            time.sleep(0.01)
    with pytest.raises(LinkClosed):
        send(link, exchange(None, text_result("x" * (1 << 20))), 1)


def test_the_helper_is_not_instrumented_by_what_the_parent_was_launched_with(tmp_path: Path) -> None:
    """opentelemetry-instrument puts a sitecustomize on PYTHONPATH; the helper must not run
    it (it would instrument the helper, which would start a helper...)."""
    script = textwrap.dedent(
        """
        import os, time
        from opentelemetry.instrumentation.mcp_tokens.config import Settings
        from opentelemetry.instrumentation.mcp_tokens.helper_link import ProcessLink
        print(os.getpid())
        link = ProcessLink(Settings())
        deadline = time.monotonic() + 60
        while link.status is None and time.monotonic() < deadline:
            link.receive()
            time.sleep(0.01)
        print("started" if link.status else "not started")
        link.close()
        """
    )
    marks = tmp_path / "ran"
    (tmp_path / "sitecustomize.py").write_text(
        f"import os\nwith open({str(marks)!r}, 'a') as f:\n    f.write(str(os.getpid()) + '\\n')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    parent = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    pid, outcome = parent.stdout.split()
    assert outcome == "started", parent.stderr
    assert marks.read_text().split() == [pid]  # the parent ran it, the helper did not


def test_the_command_names_this_interpreter_this_path_and_its_parent() -> None:
    command = helper_command()
    assert command[0] == sys.executable and command[1] == "-I"
    assert "auto_instrumentation" not in command[4]
    assert command[5] == "-" and helper_command(7)[5] == "7"  # no board / the board's descriptor
    assert command[6] == str(os.getpid())


@linux_only
def test_the_helper_waits_while_a_call_of_the_application_is_in_flight(link: ProcessLink) -> None:
    wait_until_ready(link)
    call = Exchange(Side.CLIENT, "tools/call", target="slow")  # in flight from here
    try:
        send(link, exchange(None, text_result("word " * 200_000)), 1)
        time.sleep(0.4)  # well under the helper's wait (max_lag_s)
        assert link.receive() == [], "the helper analysed while a call was in flight"
    finally:
        call.finish(None)
    [findings] = receive(link, 1, timeout=10)
    assert findings.response is not None and findings.response.exact


@linux_only
def test_with_idle_cpu_the_helper_waits_at_most_its_bound_after_the_response(link: ProcessLink) -> None:
    wait_until_ready(link)
    bound = ALWAYS_IDLE.helper_max_wait_s
    call = Exchange(Side.CLIENT, "tools/call", target="never-ends")
    text = text_result("word " * 200_000)
    try:
        started = time.monotonic()
        send(link, exchange(None, text), 1)
        receive(link, 1, timeout=10)
        assert bound * 0.9 <= time.monotonic() - started < bound * 4
        # Sustained load: an exchange already that old is analysed alongside the calls.
        started = time.monotonic()
        send(link, exchange(None, text, ended_ago_s=2 * bound), 2)
        [findings] = receive(link, 1, timeout=10)
        assert findings.seq == 2 and time.monotonic() - started < bound * 0.9
    finally:
        call.finish(None)


def test_an_exchange_the_worker_has_given_up_is_not_analysed(link: ProcessLink) -> None:
    text = text_result("word " * 1_000)
    send(link, exchange(None, text, ended_ago_s=ALWAYS_IDLE.answer_within_s + 1), 1)
    send(link, exchange(None, text), 2)
    [findings] = receive(link, 1, timeout=10)
    assert findings.seq == 2


def test_the_thread_link_answers_like_the_helper() -> None:
    link = ThreadLink(Settings())
    try:
        send(link, exchange({"name": "report", "arguments": {}}, text_result("hello")), 5)
        [findings] = receive(link, 1)
        assert link.status is not None and link.status.exact
        assert findings.seq == 5 and findings.response is not None and findings.response.exact
    finally:
        link.close()
    with pytest.raises(LinkClosed):
        send(link, exchange(None, text_result("late")), 6)


# --- the helper's life ------------------------------------------------------------------------
def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped has exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


_PARENT = textwrap.dedent(
    """
    import sys, time
    from opentelemetry.instrumentation.mcp_tokens.config import Settings
    from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
    from opentelemetry.instrumentation.mcp_tokens.helper_link import ProcessLink
    link = ProcessLink(Settings())
    while link.status is None:
        link.receive()
        link.wait(0.05)
    print(link.pid, flush=True)
    if sys.argv[1] == "busy":
        item = Exchange(Side.SERVER, "tools/call", target="big")
        item.finish({"content": [{"type": "text", "text": "word, " * 5_000_000}]})
        for step in link.sender(item, 1, False):
            if step is False:
                time.sleep(0.001)
        while not link.flush():
            time.sleep(0.001)
        print("sent", flush=True)
    time.sleep(120)
    """
)


@linux_only
@pytest.mark.parametrize("state", ["idle", "busy"])
def test_the_helper_exits_within_100_ms_of_its_parent_being_killed(state: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, state], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        helper = int(parent.stdout.readline())
        if state == "busy":
            assert parent.stdout.readline().strip() == "sent"
            before = Path(f"/proc/{helper}/stat").read_text()
            time.sleep(0.3)
            assert Path(f"/proc/{helper}/stat").read_text() != before  # it is counting (CPU time moves)
        assert _alive(helper)
        killed = time.monotonic()
        parent.send_signal(signal.SIGKILL)
        while _alive(helper) and time.monotonic() - killed < 5:
            time.sleep(0.002)
        assert not _alive(helper), "the helper outlived the process that started it"
        assert time.monotonic() - killed < 0.1
    finally:
        parent.kill()
        parent.wait(10)


@linux_only
def test_after_a_large_payload_the_helper_gives_its_memory_back(link: ProcessLink) -> None:
    send(link, exchange(None, text_result("a small result")), 1)
    receive(link, 1)
    idle = _rss_kb(link.pid)
    text = "".join(f"row {i}: {'value ' * 5}\n" for i in range(650_000))  # about 28 MB
    send(link, exchange(None, text_result(text)), 2, timeout=120)
    del text
    [findings] = receive(link, 1, timeout=120)
    assert findings.response is not None and findings.response.exact
    time.sleep(0.2)
    after = _rss_kb(link.pid)
    assert after <= 1.2 * idle, f"idle {idle} KB, after a 30 MB result {after} KB"


_INSTRUMENTED = textwrap.dedent(
    """
    import os, sys
    from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor
    from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument()
    import mcp  # an MCP application: patched now, and still no exchange
    print(os.getpid(), flush=True)
    sys.stdin.readline()  # counted: now the process's first exchange
    item = Exchange(Side.CLIENT, "tools/call", target="t")
    item.finish({"content": [{"type": "text", "text": "hello"}]})
    instrumentor.pipeline.submit(item)
    print("flushed" if instrumentor.pipeline.force_flush(60) else "not flushed", flush=True)
    sys.stdin.readline()
    """
)


def _children(pid: int) -> list[int]:
    return [
        int(child)
        for path in Path(f"/proc/{pid}/task").glob("*/children")
        for child in path.read_text().split()
    ]


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


@linux_only
def test_a_process_starts_no_helper_and_no_thread_until_its_first_exchange() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _INSTRUMENTED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        pid = int(process.stdout.readline())
        time.sleep(1.0)  # what instrument() started would be running by now
        assert _children(pid) == [] and _threads(pid) == 1
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "flushed"
        assert len(_children(pid)) == 1 and _threads(pid) > 1  # the helper, the worker thread
    finally:
        process.kill()
        process.wait(10)


@linux_only
def test_a_process_launched_with_opentelemetry_instrument_that_never_imports_mcp_has_no_helper() -> None:
    launcher = Path(sys.executable).with_name("opentelemetry-instrument")
    if not launcher.exists():
        pytest.skip("opentelemetry-instrument is not installed next to this interpreter")
    command = [
        str(launcher),
        "--traces_exporter",
        "none",
        "--metrics_exporter",
        "none",
        "--logs_exporter",
        "none",
    ]
    script = (
        "import os, sys\n"
        "from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor\n"
        "instrumented = McpTokensInstrumentor().is_instrumented_by_opentelemetry\n"
        "print(os.getpid(), instrumented, 'mcp' in sys.modules, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"}
    process = subprocess.Popen(
        [*command, sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        pid, instrumented, imported = process.stdout.readline().split()
        assert instrumented == "True"  # the launcher ran instrument()
        assert imported == "False"  # and the MCP SDK is patched when the application imports it
        time.sleep(1.0)
        assert _children(int(pid)) == []
    finally:
        process.kill()
        process.wait(10)
