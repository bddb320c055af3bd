"""The analysis helper: a child process that analyses what the instrumented process sends.

Counting tokens and looking for padding is CPU work in Python and Rust; on a thread of
the application it would compete for the GIL with the application's event loop, which
then waits whenever it needs the interpreter. So each instrumented process starts one
helper (`ProcessLink`): the same Python, isolated (`-I`: no PYTHON* variables, so not
auto-instrumented again by `opentelemetry-instrument`'s sitecustomize) but with the
parent's `sys.path`, at the lowest CPU priority of the normal policy (nice 19), in a
session of its own (a terminal's Ctrl-C is the application's to handle). It reads jobs
from its stdin and writes findings to its stdout (channel.py), and exits when its stdin
closes: when the application stops, or dies. Between two pieces of work (a chunk of text
of at most `HELPER_COUNT_CHUNK_CHARS`, a payload) it waits while the application has an MCP
operation in flight, as the activity board it shares with the application shows
(activity.py): for `HELPER_MAX_WAIT_S` after the exchange's response, and for as long as
the calls go on if the machine has no idle CPU for it or the worker sent the exchange to
be held (`Job.hold`, cpu.py). It reads jobs ahead while it waits (`ReadAhead`, at most
`HOLD_JOBS` / `HOLD_BYTES`), so a burst longer than the worker's wait is held here for the
next quiet moment. An exchange it reaches `ANSWER_WITHIN_S` after its response is not
analysed: the worker has given it up.

Where no helper can run (no interpreter to start: embedded or frozen applications; or
`OTEL_INSTRUMENTATION_MCP_TOKENS_ANALYSIS=thread`), `ThreadLink` runs the same analysis
on a thread of the application, in short slices (worker.py's `sliced`).

Both links answer the worker (worker.py) the same way: `sender(...)` sends one job in
steps, `receive()` returns what has arrived, never blocking.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import IO, Protocol

from . import channel
from .activity import ActivityBoard, QuietWaiter
from .analyst import ANSWER_WITHIN_S, Analyst, AnalystStatus, Findings, Job
from .config import Settings

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
_logger = logging.getLogger(__name__)

# Characters tokenised per call on the thread link: well under 1 ms of tokenizer time.
THREAD_COUNT_CHUNK_CHARS = 1 << 14
# Characters tokenised per call in the helper (about 3 ms of tokenizer time): how long it
# may go on before it looks at the activity board again.
HELPER_COUNT_CHUNK_CHARS = 1 << 16
# How long after an exchange's response the helper waits for the application's operations
# at least (past it, it works alongside them if the machine has idle CPU for it, cpu.py).
# The worker's own wait, worker.MAX_LAG_S, is counted from the same moment.
HELPER_MAX_WAIT_S = 1.0
# What `os.read` takes from the findings pipe at a time, and how much the jobs pipe holds.
READ_BYTES = 1 << 16
PIPE_BYTES = 1 << 20

# What the helper reads ahead of its analysis at most (jobs, and bytes of their frames):
# exchanges held for a quiet moment wait here rather than in the instrumented process's
# queue, where they would fill it and be dropped on the caller's path. One job is always
# read, whatever its size.
HOLD_JOBS = 256
HOLD_BYTES = 16 << 20

Message = Findings | AnalystStatus
ReadJob = tuple[Job, object, object, int]  # the job, its request, its response, frame bytes


class LinkClosed(Exception):
    """The helper is gone (it exited, or its pipes broke)."""


class Link(Protocol):
    def sender(self, job: Job, request: object, response: object) -> Iterator[bool]:
        """Sends one job, a step per `next()`: True after a step, False when the link
        cannot take more right now (try again later). What a step leaves pending goes with
        the next `flush()`. Raises LinkClosed."""
        ...

    def flush(self) -> bool:
        """Send what is pending; whether all of it went. Raises LinkClosed."""
        ...

    def receive(self) -> list[Message]:
        """What arrived since the last call; never blocks. Raises LinkClosed at the end."""
        ...

    def wait(self, timeout: float) -> None:
        """Block (without the GIL) until something may have arrived, or `timeout`."""
        ...

    @property
    def started(self) -> bool:
        """Whether the analysis started (a helper that failed at start-up never does)."""
        ...

    def close(self, timeout: float = 2.0) -> None: ...

    def forget(self) -> None:
        """In a forked child: let go of the link without touching what the parent uses."""
        ...


# --- the instrumented process's side -------------------------------------------------------
class ProcessLink:
    """A helper process and the two pipes to it."""

    def __init__(self, settings: Settings) -> None:
        from .exchange import IN_FLIGHT

        board_fd = IN_FLIGHT.board_fd()
        self._process = subprocess.Popen(
            helper_command(board_fd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # a traceback of the helper belongs in the application's log
            close_fds=True,
            pass_fds=() if board_fd is None else (board_fd,),
            start_new_session=os.name == "posix",
        )
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        self._stdin, self._stdout = stdin, stdout
        self._write_fd, self._read_fd = stdin.fileno(), stdout.fileno()
        os.set_blocking(self._write_fd, False)
        os.set_blocking(self._read_fd, False)
        _widen_pipe(self._write_fd)
        self._reader = channel.FrameReader()
        # Frames (or what is left of one) the pipe has not taken yet.
        settings_frame = channel.message(channel.SETTINGS, settings)
        self._unsent: deque[memoryview] = deque([memoryview(settings_frame)])
        self._unsent_bytes = len(settings_frame)
        self._started = False
        self._closed = False
        self.flush()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def pid(self) -> int:
        return self._process.pid

    def sender(self, job: Job, request: object, response: object) -> Iterator[bool]:
        for data in channel.job_frames(job, request, response):
            if not data:  # a step that completed no frame
                yield True
                continue
            self._unsent.append(memoryview(data))
            self._unsent_bytes += len(data)
            # Small frames (a small job's) gather and go in one write, with the next flush.
            while self._unsent_bytes >= channel.PIECE_BYTES and not self.flush():
                yield False
            yield True

    def flush(self) -> bool:
        """Write what the pipe takes of the frames not sent yet; whether all were."""
        unsent = self._unsent
        if len(unsent) > 1:
            unsent.appendleft(memoryview(b"".join(unsent)))
            while len(unsent) > 1:
                unsent.pop()
        while unsent:
            try:
                written = os.write(self._write_fd, unsent[0])
            except BlockingIOError:
                return False
            except OSError as exc:
                raise LinkClosed(f"the helper's stdin broke: {exc}") from None
            self._unsent_bytes -= written
            if written < len(unsent[0]):
                unsent[0] = unsent[0][written:]
            else:
                unsent.popleft()
        return True

    def receive(self) -> list[Message]:
        self.flush()  # the settings, if the pipe could not take them at once
        ended = False
        while True:
            try:
                data = os.read(self._read_fd, READ_BYTES)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                ended = True
                break
            if not data:
                ended = True
                break
            self._reader.feed(data)
        messages = [self._decode(kind, body) for kind, body in self._reader.frames()]
        if ended:
            if messages:
                return messages  # the end is reported by the next call
            raise LinkClosed(f"the analysis helper exited ({self._exit_code()})")
        return messages

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(OSError, ValueError):
            select.select([self._read_fd], [], [], max(0.0, timeout))

    def _decode(self, kind: bytes, body: bytes) -> Message:
        value = pickle.loads(body)
        if kind == channel.READY:
            self._started = True
        if not isinstance(value, Findings | AnalystStatus):
            raise LinkClosed(f"the analysis helper sent {type(value).__name__}")
        return value

    def _exit_code(self) -> str:
        code = self._process.poll()
        return "still running" if code is None else f"exit status {code}"

    def close(self, timeout: float = 2.0) -> None:
        """Close its stdin (it exits when done with the job at hand) and reap it."""
        if self._closed:
            return
        self._closed = True
        for stream in (self._stdin, self._stdout):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                self._process.wait(timeout)
        except OSError:  # a SIGCHLD handler of the application reaped it first
            pass

    def forget(self) -> None:
        """In a forked child: drop this process's copies of the pipes, leave the helper
        (it belongs to the parent) alone."""
        self._closed = True
        for fd in (self._write_fd, self._read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def _widen_pipe(fd: int) -> None:
    """Let the jobs pipe hold a 1 MiB payload at once (Linux; 64 KiB otherwise), so a
    large payload goes in one round of the worker rather than sixteen."""
    setpipe_sz = getattr(fcntl, "F_SETPIPE_SZ", 1031) if fcntl is not None else None
    if setpipe_sz is not None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setpipe_sz, PIPE_BYTES)


def helper_command(board_fd: int | None = None) -> list[str]:
    """The helper's command line: this interpreter, isolated, with this process's sys.path
    (an application may import us from a path only its own start-up set), and the
    descriptor of the activity board it inherits (`-` for none)."""
    if getattr(sys, "frozen", False) or not sys.executable:
        raise OSError("no Python interpreter to start the analysis helper with")
    paths = [os.path.abspath(path) if path else os.getcwd() for path in sys.path if _keeps(path)]
    bootstrap = (
        "import json,sys;sys.path[:0]=json.loads(sys.argv.pop(1));"
        "from opentelemetry.instrumentation.mcp_tokens.helper import main;sys.exit(main())"
    )
    board = "-" if board_fd is None else str(board_fd)
    return [sys.executable, "-I", "-c", bootstrap, json.dumps(paths), board]


def _keeps(path: str) -> bool:
    # opentelemetry-instrument's sitecustomize directory: nothing to import from there.
    return not path.rstrip("/\\").endswith(os.path.join("instrumentation", "auto_instrumentation"))


class ThreadLink:
    """The analysis on a thread of this process (no helper process)."""

    def __init__(self, settings: Settings) -> None:
        from .worker import yield_gil

        self._analyst = Analyst(
            settings, counting_threads=1, chunk_chars=THREAD_COUNT_CHUNK_CHARS, pause=yield_gil
        )
        self._jobs: deque[tuple[Job, object, object]] = deque()
        self._arrived: deque[Message] = deque()
        self._has_arrived = threading.Event()
        self._condition = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="mcp-tokens-analysis-thread", daemon=True)
        self._thread.start()

    @property
    def started(self) -> bool:
        return True

    def sender(self, job: Job, request: object, response: object) -> Iterator[bool]:
        with self._condition:
            if self._closing:
                raise LinkClosed("the analysis thread stopped")
            self._jobs.append((job, request, response))
            self._condition.notify()
        yield True

    def flush(self) -> bool:
        return True

    def wait(self, timeout: float) -> None:
        self._has_arrived.wait(max(0.0, timeout))

    def receive(self) -> list[Message]:
        self._has_arrived.clear()
        messages: list[Message] = []
        while self._arrived:
            messages.append(self._arrived.popleft())
        if not messages and not self._thread.is_alive():
            raise LinkClosed("the analysis thread stopped")
        return messages

    def close(self, timeout: float = 2.0) -> None:
        with self._condition:
            self._closing = True
            self._condition.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def forget(self) -> None:
        self._closing = True

    def _run(self) -> None:
        from .worker import needs_slicing, sliced

        analyst = self._analyst
        analyst.start()
        self._arrived.append(analyst.status())
        self._has_arrived.set()
        while True:
            with self._condition:
                while not self._jobs and not self._closing:
                    self._condition.wait()
                if not self._jobs:
                    return
                job, request, response = self._jobs.popleft()
            heavy = needs_slicing(request, response)
            with sliced() if heavy else contextlib.nullcontext():
                findings = analyst.analyse(job, request, response)
            del request, response
            self._arrived.append(findings)
            self._has_arrived.set()


# --- the helper process's side -------------------------------------------------------------
def main() -> int:
    """The helper's entry point (see `helper_command`)."""
    _run_in_background()
    jobs = os.fdopen(os.dup(0), "rb", buffering=channel.PIECE_BYTES + channel.HEADER.size)
    findings = os.fdopen(os.dup(1), "wb", buffering=0)
    # Whatever a library prints must not land in the channel.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    first = channel.read_frame(jobs)
    if first is None or first[0] != channel.SETTINGS:
        return 2
    settings = pickle.loads(first[1])
    if not isinstance(settings, Settings):
        return 2
    waiter = QuietWaiter(_board_of(sys.argv[1:]))
    analyst = Analyst(settings, chunk_chars=HELPER_COUNT_CHUNK_CHARS, pause=waiter.wait)
    HelperLoop(analyst, jobs, findings, waiter).run()
    return 0


def _board_of(arguments: list[str]) -> ActivityBoard | None:
    if not arguments or not arguments[0].isdigit():
        return None
    return ActivityBoard.open(int(arguments[0]))


def _run_in_background() -> None:
    """The lowest CPU priority of the normal policy (nice 19): the application's threads
    get the CPU first. Not SCHED_IDLE: on Linux 6.x a running SCHED_IDLE task delays a
    waking normal task by up to a scheduler slice (a ping-pong over pipes next to two
    busy SCHED_IDLE processes: p99 1.9 -> 5.6 ms; next to two nice 19 ones: 1.7-2.1 ms)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(AttributeError, OSError):
        os.nice(19)


class HelperLoop:
    """Reads jobs, analyses them one at a time, writes the findings."""

    def __init__(
        self, analyst: Analyst, jobs: IO[bytes], findings: IO[bytes], waiter: QuietWaiter | None = None
    ) -> None:
        self._analyst = analyst
        self._jobs = jobs
        self._findings = findings
        self._waiter = waiter
        self._write_lock = threading.Lock()
        # Findings go after the status: the worker learns the encoding before any count.
        self._announced = threading.Event()

    def run(self) -> None:
        self._analyst.start()
        threading.Thread(target=self._announce, name="mcp-tokens-ready", daemon=True).start()
        ahead = ReadAhead(self._read_job)
        try:
            while True:
                taken = ahead.take()
                if taken is None:
                    return
                job, request, response = taken
                if self._waiter is not None:
                    self._waiter.begin(job.end_ns / 1e9 + HELPER_MAX_WAIT_S, hold=job.hold)
                    self._waiter.wait()
                if time.time() - job.end_ns / 1e9 > ANSWER_WITHIN_S:
                    continue  # given up by the worker already (counted there as overload)
                findings = self._findings_of(job, request, response)
                del taken, request, response
                self._announced.wait()
                self._send(channel.FINDINGS, findings)
        except (BrokenPipeError, KeyboardInterrupt):
            return

    def _findings_of(self, job: Job, request: object, response: object) -> Findings:
        if isinstance(request, _Undecodable):
            return self._analyst.failed(job, request.error)
        if isinstance(response, _Undecodable):
            return self._analyst.failed(job, response.error)
        return self._analyst.analyse(job, request, response)

    def _announce(self) -> None:
        # On a thread: jobs are read (and the pipe kept drained) while the tokenizer loads.
        try:
            with contextlib.suppress(OSError):
                self._send(channel.READY, self._analyst.status())
        finally:
            self._announced.set()

    def _send(self, kind: bytes, value: object) -> None:
        data = channel.message(kind, value)
        with self._write_lock:
            self._findings.write(data)

    def _read_job(self) -> ReadJob | None:
        header = channel.read_frame(self._jobs)
        if header is None:
            return None
        kind, body = header
        if kind != channel.JOB:
            raise ValueError(f"expected a job, got frame {kind!r}")
        job, has_request, has_response = pickle.loads(body)
        request, request_bytes = self._read_payload() if has_request else (None, 0)
        response, response_bytes = self._read_payload() if has_response else (None, 0)
        return job, request, response, len(body) + request_bytes + response_bytes

    def _read_payload(self) -> tuple[object, int]:
        """A payload, and the bytes of its frames."""
        payload = channel.PayloadBuilder()
        failure: str | None = None
        size = 0
        while True:
            frame = channel.read_frame(self._jobs)
            if frame is None:
                raise BrokenPipeError("the instrumented process closed the channel mid-payload")
            kind, body = frame
            size += len(body)
            if kind == channel.END:
                break
            try:
                payload.add(kind, body)
            except (ValueError, pickle.UnpicklingError) as exc:
                failure = failure or type(exc).__name__
        try:
            return (_Undecodable(failure) if failure else payload.build()), size
        except (ValueError, RecursionError) as exc:  # not what the sender encodes; never fatal
            return _Undecodable(type(exc).__name__), size


class ReadAhead:
    """Reads jobs on a thread of its own while the analysis works or waits, up to
    `HOLD_JOBS` and `HOLD_BYTES` ahead of it: the instrumented process's pipe stays open
    for what the helper holds for a quiet moment, and fills (the worker then drops what
    it has, off the calls' path) only once the helper holds all it may."""

    def __init__(self, read: Callable[[], ReadJob | None]) -> None:
        self._read = read
        self._held: deque[ReadJob] = deque()
        self._bytes = 0
        self._ended = False
        self._failure: BaseException | None = None
        self._condition = threading.Condition()
        threading.Thread(target=self._run, name="mcp-tokens-read-ahead", daemon=True).start()

    def take(self) -> tuple[Job, object, object] | None:
        """The next job (waits for one); None once the instrumented process closed the
        channel. Raises what the reading raised, once what was read before is taken."""
        with self._condition:
            while not self._held and not self._ended:
                self._condition.wait()
            if self._held:
                job, request, response, size = self._held.popleft()
                self._bytes -= size
                self._condition.notify_all()
                return job, request, response
            if self._failure is not None:
                raise self._failure
            return None

    def _full(self) -> bool:
        held = self._held
        return len(held) >= HOLD_JOBS or (bool(held) and self._bytes >= HOLD_BYTES)

    def _run(self) -> None:
        try:
            while True:
                with self._condition:
                    while self._full():
                        self._condition.wait()
                read = self._read()
                if read is None:
                    return
                with self._condition:
                    self._held.append(read)
                    self._bytes += read[3]
                    self._condition.notify_all()
                del read
        except BaseException as exc:  # the analysis loop raises it in its own thread
            self._failure = exc
        finally:
            with self._condition:
                self._ended = True
                self._condition.notify_all()


class _Undecodable:
    """A payload the helper could not parse back (kept apart from any payload value)."""

    def __init__(self, error: str) -> None:
        self.error = error
