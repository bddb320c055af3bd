"""The instrumented process's side of the analysis helper (helper.py): starting it, and the
two non-blocking pipes to it (frames: channel.py).

The helper is this interpreter, isolated (`-I`: no PYTHON* variables, so not instrumented
again by `opentelemetry-instrument`'s sitecustomize) but with this process's `sys.path`, in
a session of its own (a terminal's Ctrl-C is the application's to handle). The worker
thread starts it, on the first exchange.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pickle
import select
import subprocess
import sys
from collections import deque
from collections.abc import Iterator

from . import channel
from .analyst import AnalystStatus, Findings, job_of
from .config import Settings
from .exchange import Exchange
from .inflight import IN_FLIGHT
from .link import LinkClosed
from .pacing import PACING, Pacing

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


class ProcessLink:
    """A helper process and the two pipes to it."""

    def __init__(self, settings: Settings, pacing: Pacing = PACING) -> None:
        self._pacing = pacing
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
        _widen_pipe(self._write_fd, pacing.pipe_bytes)
        self._reader = channel.FrameReader()
        # Frames (or what is left of one) the pipe has not taken yet.
        first = channel.message(channel.SETTINGS, (settings, pacing))
        self._unsent: deque[memoryview] = deque([memoryview(first)])
        self._unsent_bytes = len(first)
        self._status: AnalystStatus | None = None
        self._closed = False
        self.flush()

    @property
    def status(self) -> AnalystStatus | None:
        return self._status

    @property
    def pid(self) -> int:
        return self._process.pid

    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[bool]:
        job = job_of(exchange, seq, behind)
        request = exchange.request if job.request_kind is not None else None
        response = exchange.response if job.response_kind is not None else None
        for data in channel.job_frames(job, request, response, self._pacing.piece_bytes):
            if not data:  # a step that completed no frame
                yield True
                continue
            self._unsent.append(memoryview(data))
            self._unsent_bytes += len(data)
            # Small frames (a small job's) gather and go in one write, with the next flush.
            while self._unsent_bytes >= self._pacing.piece_bytes and not self.flush():
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

    def receive(self) -> list[Findings]:
        self.flush()  # the settings, if the pipe could not take them at once
        ended = False
        while True:
            try:
                data = os.read(self._read_fd, self._pacing.read_bytes)
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
        findings: list[Findings] = []
        for kind, body in self._reader.frames():
            found = self._decode(kind, body)
            if found is not None:
                findings.append(found)
        if ended and not findings:  # else the end is reported by the next call
            raise LinkClosed(f"the analysis helper exited ({self._exit_code()})")
        return findings

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(OSError, ValueError):
            select.select([self._read_fd], [], [], max(0.0, timeout))

    def _decode(self, kind: bytes, body: bytes) -> Findings | None:
        value = pickle.loads(body)
        if kind == channel.READY and isinstance(value, AnalystStatus):
            self._status = value
            return None
        if kind == channel.FINDINGS and isinstance(value, Findings):
            return value
        raise LinkClosed(f"the analysis helper sent {type(value).__name__} in a {kind!r} frame")

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


def _widen_pipe(fd: int, size: int) -> None:
    """Let the jobs pipe hold a large payload at once (Linux; 64 KiB otherwise), so it goes
    in one round of the worker rather than many."""
    setpipe_sz = getattr(fcntl, "F_SETPIPE_SZ", 1031) if fcntl is not None else None
    if setpipe_sz is not None and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setpipe_sz, size)


def helper_command(board_fd: int | None = None) -> list[str]:
    """The helper's command line: this interpreter, isolated, with this process's sys.path
    (an application may import us from a path only its own start-up set), the descriptor
    of the activity board it inherits (`-` for none) and this process's id (its parent)."""
    if getattr(sys, "frozen", False) or not sys.executable:
        raise OSError("no Python interpreter to start the analysis helper with")
    paths = [os.path.abspath(path) if path else os.getcwd() for path in sys.path if _keeps(path)]
    bootstrap = (
        "import json,sys;sys.path[:0]=json.loads(sys.argv.pop(1));"
        "from opentelemetry.instrumentation.mcp_tokens.helper import main;sys.exit(main())"
    )
    board = "-" if board_fd is None else str(board_fd)
    return [sys.executable, "-I", "-c", bootstrap, json.dumps(paths), board, str(os.getpid())]


def _keeps(path: str) -> bool:
    # opentelemetry-instrument's sitecustomize directory: nothing to import from there.
    return not path.rstrip("/\\").endswith(os.path.join("instrumentation", "auto_instrumentation"))
