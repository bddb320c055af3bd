# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The counting service (counting/), for real: started on demand, shared, fair, private to its
user, killed, replaced, and gone once idle."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.analyst import Findings
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting import protocol
from opentelemetry.instrumentation.mcp_tokens.counting.address import address_of, supported
from opentelemetry.instrumentation.mcp_tokens.counting.client import ServiceLink, connect, spec_of
from opentelemetry.instrumentation.mcp_tokens.counting.options import Options
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec, load_tokenizer
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.guard.remote import RemoteMeasure
from opentelemetry.instrumentation.mcp_tokens.guard.tokens import measure_of
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

pytestmark = pytest.mark.skipif(
    not (supported() and sys.platform.startswith("linux")), reason="Unix sockets with SO_PEERCRED, /proc"
)


def service_pids(directory: Path) -> list[int]:
    """The service's processes: those running its module with `directory` in their arguments."""
    found = []
    needle = os.fsencode(directory)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes()
                if needle in command and b"counting.service import main" in command:
                    found.append(int(entry.name))
    return found


def supervisor_of(directory: Path) -> int:
    pids = service_pids(directory)
    parents = [pid for pid in pids if _ppid(pid) not in pids]
    assert len(parents) == 1, pids
    return parents[0]


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def directory() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="mct-")) / "counter"
    try:
        yield path
    finally:
        for pid in service_pids(path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path.parent, ignore_errors=True)


def settings_in(directory: Path, **fields: object) -> Settings:
    return Settings(counter_dir=str(directory), counter_idle_timeout=30.0, **fields)  # type: ignore[arg-type]


def text_exchange(text: str, target: str = "report") -> Exchange:
    item = Exchange(Side.SERVER, "tools/call", target=target, server_name="crm")
    item.request = {"name": target, "arguments": {}}
    item.finish({"content": [{"type": "text", "text": text}]})
    return item


def send(link: ServiceLink, item: Exchange, seq: int) -> None:
    link.send(item, seq, False)
    deadline = time.monotonic() + 30
    while link.unsent:
        assert time.monotonic() < deadline, "the service does not read"
        time.sleep(0.005)
        link.flush()


def receive(link: ServiceLink, count: int, timeout: float = 60) -> list[Findings]:
    got: list[Findings] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} arrived"
        got.extend(link.receive())
        time.sleep(0.005)
    return got


def test_a_link_sends_a_round_s_small_jobs_in_one_call_and_a_large_one_at_once(
    directory: Path, o200k: object
) -> None:
    link = ServiceLink(settings_in(directory), Options(), 30)
    send(link, text_exchange("hello"), 0)  # the HELLO is out
    link.send(text_exchange("small " * 10), 1, False)
    link.send(text_exchange("small " * 20), 2, False)
    held = link.unsent
    assert held > 0  # queued, not sent: the worker flushes at the end of its round
    link.flush()
    assert link.unsent < held
    link.send(text_exchange("large " * 400_000), 3, False)  # over a socket's worth
    assert link.unsent < 2_400_000  # the socket took some as the job was queued
    send(link, text_exchange("last"), 4)
    assert sorted(findings.seq for findings in receive(link, 5)) == [0, 1, 2, 3, 4]


def test_the_first_client_starts_the_service_and_the_others_find_it(directory: Path, o200k: object) -> None:
    settings = settings_in(directory)
    first, second = ServiceLink(settings, Options(), 30), ServiceLink(settings, Options(), 30)
    send(first, text_exchange("hello world " * 50), 1)
    send(second, text_exchange("hello again " * 50), 1)
    (one,), (two,) = receive(first, 1), receive(second, 1)
    assert one.response is not None and one.response.exact
    assert one.response.tokens == len(o200k.encode_ordinary("hello world " * 50))  # type: ignore[attr-defined]
    assert two.response is not None and two.response.exact
    assert first.status is not None and first.status.encoding == "o200k_base"
    supervisor_of(directory)  # one service for both
    assert directory.stat().st_mode & 0o777 == 0o700
    address = address_of(spec_of(settings), str(directory))
    assert address.socket.stat().st_mode & 0o777 == 0o600
    assert address.guard_socket.stat().st_mode & 0o777 == 0o600
    first.close()
    second.close()


def test_counting_runs_at_idle_priority_and_the_guard_at_normal(directory: Path) -> None:
    ServiceLink(settings_in(directory, counter_processes=2), Options(), 30).close()
    supervisor = supervisor_of(directory)
    assert wait_for(lambda: len(service_pids(directory)) == 3)
    counting = [pid for pid in service_pids(directory) if pid != supervisor]
    assert os.sched_getscheduler(supervisor) == os.SCHED_OTHER
    # Each counting process lowers its own priority once forked: on a busy machine it shows in
    # /proc a moment before it has.
    assert wait_for(lambda: [os.sched_getscheduler(pid) for pid in counting] == [os.SCHED_IDLE] * 2)
    # In the starter's session: where the kernel groups scheduling by session (autogroup), a
    # session of its own would compete with the application as an equal whatever the
    # priority of its processes; SCHED_IDLE yields only within the group.
    assert os.getsid(supervisor) == os.getsid(0)
    # A process group of its own, and deaf to hang-ups: job control (a terminal's Ctrl-C, a
    # supervisor killing the starter's group) and a closing terminal do not reach it.
    assert os.getpgid(supervisor) not in (os.getpgid(0), os.getsid(0))
    os.kill(supervisor, signal.SIGHUP)
    os.kill(supervisor, signal.SIGINT)
    time.sleep(0.3)
    assert supervisor_of(directory) == supervisor and len(service_pids(directory)) == 3


@pytest.mark.skipif(not Path("/proc/self/comm").exists(), reason="kernel names are read from /proc (Linux)")
def test_ps_and_top_show_the_service_and_its_counters_by_name(directory: Path) -> None:
    ServiceLink(settings_in(directory, counter_processes=2), Options(), 30).close()
    supervisor = supervisor_of(directory)
    assert wait_for(lambda: len(service_pids(directory)) == 3)
    counting = [pid for pid in service_pids(directory) if pid != supervisor]
    assert comm_of(supervisor) == "mcp-tokens-svc"
    # Each counting process names itself once forked (a moment after /proc lists it).
    assert wait_for(lambda: [comm_of(pid) for pid in counting] == ["mcp-tokens-cnt"] * 2)


def comm_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_a_directory_others_can_open_is_refused(directory: Path) -> None:
    directory.mkdir(parents=True, mode=0o755)
    directory.chmod(0o755)
    worker_sink: list[str] = []
    with pytest.raises(Exception, match="only this user can open"):
        connect(settings_in(directory), 5)
    assert worker_sink == [] and service_pids(directory) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_is_refused(directory: Path) -> None:
    settings = settings_in(directory)
    ServiceLink(settings, Options(), 30).close()
    address = address_of(spec_of(settings), str(directory))
    script = textwrap.dedent(
        f"""
        import os, socket
        os.setgid(65534); os.setuid(65534)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        try:
            sock.connect({os.fspath(address.socket)!r})
        except PermissionError:
            print("denied")
        else:
            try:
                sock.sendall({protocol.frame(protocol.HELLO, b"x")!r})
                print("answered" if sock.recv(1) else "closed")
            except (ConnectionResetError, BrokenPipeError):
                print("closed")
        """
    )

    def as_nobody() -> str:
        run = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
        )
        return run.stdout.strip() or run.stderr

    assert as_nobody() == "denied"  # the directory is 0700
    for path in (directory.parent, directory):  # past the file system, the service checks who connected
        path.chmod(0o711)
    address.socket.chmod(0o666)
    assert as_nobody() == "closed"
    directory.chmod(0o700)


def test_a_second_service_never_starts_beside_a_live_one(directory: Path) -> None:
    settings = settings_in(directory)
    racers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from opentelemetry.instrumentation.mcp_tokens.counting.client"
                " import connect; from opentelemetry.instrumentation.mcp_tokens.config import Settings;"
                f" connect(Settings(counter_dir={str(directory)!r}), 60).close()",
            ],
        )
        for _ in range(4)
    ]
    assert [racer.wait(90) for racer in racers] == [0] * 4
    first = supervisor_of(directory)
    time.sleep(0.5)
    assert supervisor_of(directory) == first
    ServiceLink(settings, Options(), 30).close()
    assert supervisor_of(directory) == first


def test_a_stale_socket_left_by_a_crash_is_reclaimed(directory: Path) -> None:
    settings = settings_in(directory)
    address = address_of(spec_of(settings), str(directory))
    directory.mkdir(parents=True, mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fspath(address.socket))
    stale.close()  # the file stays, nobody listens: what a SIGKILL leaves
    link = ServiceLink(settings, Options(), 30)
    send(link, text_exchange("after a crash"), 1)
    assert receive(link, 1)[0].response is not None
    link.close()


def test_a_busy_client_does_not_starve_another(directory: Path) -> None:
    settings = settings_in(directory, counter_processes=1)
    busy, quiet = ServiceLink(settings, Options(), 30), ServiceLink(settings, Options(), 30)
    large = "word " * 400_000  # 2 MB each: well over a second of counting for all of them
    for seq in range(12):
        busy.send(text_exchange(large), seq, False)
    busy_done: list[Findings] = []
    time.sleep(0.1)
    send(quiet, text_exchange("just this"), 1)
    deadline = time.monotonic() + 120
    answered: list[Findings] = []
    while not answered:
        assert time.monotonic() < deadline
        busy.flush()
        busy_done.extend(busy.receive())
        answered = quiet.receive()
        time.sleep(0.005)
    assert len(busy_done) <= 3, "the quiet client waited for the busy one's whole queue"
    busy.close()
    quiet.close()


def test_guard_questions_get_the_answers_of_a_local_measure(directory: Path) -> None:
    settings = settings_in(directory)
    remote = RemoteMeasure(settings, connect_timeout=30, answer_timeout=30)
    local = measure_of(load_tokenizer(TokenizerSpec("o200k_base")), settings.max_bytes)
    assert local is not None
    text = "The guard cuts results at token boundaries. 日本語も。 " * 3000
    assert remote.max_token_bytes == local.max_token_bytes and remote.name == "o200k_base"
    assert remote.count(text) == local.count(text)
    assert remote.count_upto(text, 100) is None and local.count_upto(text, 100) is None
    assert remote.count_upto(text[:200], 1000) == local.count_upto(text[:200], 1000)
    assert remote.prefix(text, 777) == local.prefix(text, 777)
    assert remote.prefix(text, 0) == (0, 0)
    remote.close()


def test_the_service_is_not_instrumented_by_what_its_first_client_was_launched_with(
    directory: Path, tmp_path: Path
) -> None:
    """opentelemetry-instrument puts a sitecustomize on PYTHONPATH: the service must not run it."""
    marks = tmp_path / "ran"
    (tmp_path / "sitecustomize.py").write_text(
        f"import os\nwith open({str(marks)!r}, 'a') as f:\n    f.write(str(os.getpid()) + '\\n')\n"
    )
    script = (
        "import os; from opentelemetry.instrumentation.mcp_tokens.counting.client import connect;"
        " from opentelemetry.instrumentation.mcp_tokens.config import Settings;"
        f" connect(Settings(counter_dir={str(directory)!r}), 60).close(); print(os.getpid())"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert run.returncode == 0, run.stderr
    assert service_pids(directory)
    assert marks.read_text().split() == [run.stdout.strip()]  # the client ran it, the service did not


def _metrics(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, object], object]]]:
    found: dict[str, list[tuple[dict[str, object], object]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "count", None) if hasattr(point, "bucket_counts") else point.value  # type: ignore[union-attr]
                    found.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
    return found


def test_sigkill_of_the_service_mid_burst_loses_no_response(directory: Path) -> None:
    reader = InMemoryMetricReader()
    pipeline = Pipeline(settings_in(directory), MeterProvider(metric_readers=[reader]).get_meter("t"))
    assert pipeline.wait_ready(60)
    killed_pid = supervisor_of(directory)
    calls = 300
    for index in range(calls):
        pipeline.submit(text_exchange(f"row {index} " * 20_000))  # 200 KB: the burst takes a while
        if index == 30:
            # Past the worker's linger_s, so that the service holds jobs when it dies.
            time.sleep(0.2)
            os.kill(killed_pid, signal.SIGKILL)  # its counting processes die with it
    assert pipeline.force_flush(120)
    metrics = _metrics(reader)
    responses = [
        count
        for attributes, count in metrics["mcp_tokens.payload"]
        if attributes[semconv.DIRECTION] == semconv.DIRECTION_RESPONSE
    ]
    assert sum(responses) == calls  # type: ignore[arg-type]
    reasons = {
        attributes[semconv.SKIP_REASON] for attributes, _ in metrics.get("mcp_tokens.analysis.skipped", [])
    }
    assert semconv.SKIP_ERROR in reasons  # what the killed service held was estimated
    assert wait_for(lambda: service_pids(directory) and supervisor_of(directory) != killed_pid)
    pipeline.shutdown()


def test_a_killed_client_is_forgotten_and_an_idle_service_leaves_only_its_lock(directory: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from opentelemetry.instrumentation.mcp_tokens.config import Settings
        from opentelemetry.instrumentation.mcp_tokens.counting.client import ServiceLink
        from opentelemetry.instrumentation.mcp_tokens.counting.options import Options
        link = ServiceLink(Settings(counter_dir={str(directory)!r}, counter_idle_timeout=1.0), Options(), 60)
        while link.status is None:
            link.receive(); time.sleep(0.01)
        print("connected", flush=True)
        time.sleep(600)
        """
    )
    client = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert client.stdout is not None and client.stdout.readline().strip() == "connected"
    supervisor = supervisor_of(directory)
    time.sleep(2.0)
    assert supervisor in service_pids(directory)  # a client is connected: it stays
    client.kill()
    client.wait(10)
    assert wait_for(lambda: not service_pids(directory), timeout=30)
    assert sorted(path.suffix for path in directory.iterdir()) == [".lock", ".log"]


_INSTRUMENTED = textwrap.dedent(
    """
    import os, sys, threading
    from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor
    from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument(counter_dir=sys.argv[1])
    import mcp  # an MCP application
    print(os.getpid(), flush=True)
    sys.stdin.readline()
    item = Exchange(Side.SERVER, "tools/call", target="t")
    item.finish({"content": [{"type": "text", "text": "hello"}]})
    instrumentor.pipeline.submit(item)
    print("flushed" if instrumentor.pipeline.force_flush(60) else "not flushed", flush=True)
    sys.stdin.readline()
    instrumentor.uninstrument()
    names = sorted(t.name for t in threading.enumerate() if t.name.startswith("mcp-tokens"))
    print(names, flush=True)
    """
)


def _threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def test_a_process_starts_nothing_until_its_first_exchange_and_uninstrument_leaves_only_the_service(
    directory: Path,
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _INSTRUMENTED, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        pid = int(process.stdout.readline())
        time.sleep(1.0)  # what instrument() started would be running by now
        assert service_pids(directory) == [] and _threads(pid) == 1
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "flushed"
        assert service_pids(directory) and _threads(pid) > 1  # the service, the worker thread
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "[]"  # no thread of ours left
        assert process.wait(30) == 0
        assert service_pids(directory)  # the shared service stays, until it is idle
    finally:
        process.kill()
        process.wait(10)


def test_a_process_launched_with_opentelemetry_instrument_that_never_imports_mcp_starts_nothing(
    directory: Path,
) -> None:
    launcher = Path(sys.executable).with_name("opentelemetry-instrument")
    if not launcher.exists():
        pytest.skip("opentelemetry-instrument is not installed next to this interpreter")
    script = (
        "import os, sys\n"
        "from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor\n"
        "instrumented = McpTokensInstrumentor().is_instrumented_by_opentelemetry\n"
        "ours = ('opentelemetry.instrumentation.mcp_tokens.' + name for name in ('config', 'pipeline'))\n"
        "loaded = any(name in sys.modules for name in ours)\n"
        "print(os.getpid(), instrumented, 'mcp' in sys.modules, loaded, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"}
    env["OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR"] = str(directory)
    command = [
        str(launcher),
        "--traces_exporter",
        "none",
        "--metrics_exporter",
        "none",
        "--logs_exporter",
        "none",
    ]
    process = subprocess.Popen(
        [*command, sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        pid, instrumented, imported, loaded = process.stdout.readline().split()
        # Instrumented, and neither the SDK nor our settings and pipeline are loaded.
        assert (instrumented, imported, loaded) == ("True", "False", "False")
        time.sleep(1.0)
        assert service_pids(directory) == [] and _threads(int(pid)) == 1
    finally:
        process.kill()
        process.wait(10)
