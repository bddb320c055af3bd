"""The analysis helper: a child process that analyses what the instrumented process sends.

Counting tokens and looking for padding is CPU work; on a thread of the application it
would compete for the GIL with the application's event loop. So the worker thread of an
instrumented process starts one helper on its first exchange (helper_link.py). It reads
jobs from its stdin and writes findings to its stdout (channel.py), one job at a time, at
the lowest CPU priority of the normal policy, and between two pieces of work (a chunk of
`Pacing.helper_chunk_chars`, a payload) it waits while the application has an MCP
operation in flight (activity.py). It exits when its stdin closes, and on Linux at once
when its parent dies (`_die_with_parent`), whatever it is doing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from . import channel
from .activity import ActivityBoard, QuietWaiter
from .analyst import Analyst, Findings, Job
from .config import Settings
from .pacing import PACING, Pacing

_PR_SET_PDEATHSIG = 1


def main() -> int:
    """The helper's entry point (see `helper_link.helper_command`): argv is the activity
    board's descriptor (`-` for none) and the parent's process id."""
    board_arg, parent_arg = [*sys.argv[1:], "-", "0"][:2]
    _die_with_parent(int(parent_arg) if parent_arg.isdigit() else 0)
    _run_in_background()
    jobs = os.fdopen(os.dup(0), "rb", buffering=PACING.piece_bytes + channel.HEADER.size)
    findings = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # whatever a library prints must not land in the channel
    sys.stdout = sys.stderr
    first = channel.read_frame(jobs)
    configuration = pickle.loads(first[1]) if first is not None and first[0] == channel.SETTINGS else None
    if not isinstance(configuration, tuple) or len(configuration) != 2:
        return 2
    settings, pacing = configuration
    if not isinstance(settings, Settings) or not isinstance(pacing, Pacing):
        return 2
    board = ActivityBoard.open(int(board_arg)) if board_arg.isdigit() else None
    waiter = QuietWaiter(board, pacing)
    analyst = Analyst(settings, pacing, chunk_chars=pacing.helper_chunk_chars, pause=waiter.wait)
    HelperLoop(analyst, jobs, findings, waiter, pacing).run()
    return 0


def _die_with_parent(parent: int) -> None:
    """Be killed by the kernel as soon as the process that started us dies (Linux).

    Its stdin's end alone comes too late: the helper reads it between two jobs, and a
    large payload's analysis takes seconds. A watchdog thread (polling the parent, or a
    pidfd) would need the GIL to act, which a long C call of the analysis can hold for a
    while. PR_SET_PDEATHSIG needs neither. It fires when the *thread* that started us ends:
    that is the worker thread, which closes the helper before it ends anyway. If the parent
    died before the signal was set, we are already someone else's child: exit now.
    """
    if not sys.platform.startswith("linux") or not parent:
        return
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)


def _run_in_background() -> None:
    """The lowest CPU priority of the normal policy (nice 19): the application's threads
    get the CPU first. Not SCHED_IDLE: on Linux 6.x a running SCHED_IDLE task delays a
    waking normal task by up to a scheduler slice, which lands on a call."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(AttributeError, OSError):
        os.nice(19)


class HelperLoop:
    """Reads jobs, analyses them one at a time, writes the findings."""

    def __init__(
        self, analyst: Analyst, jobs: IO[bytes], findings: IO[bytes], waiter: QuietWaiter, pacing: Pacing
    ) -> None:
        self._analyst = analyst
        self._jobs = jobs
        self._findings = findings
        self._waiter = waiter
        self._pacing = pacing
        self._write_lock = threading.Lock()
        # Findings go after the status: the worker learns the encoding before any count.
        self._announced = threading.Event()
        self._trim = _malloc_trim()

    def run(self) -> None:
        self._analyst.start()
        # On a thread: jobs are read (and the pipe kept drained) while the tokenizer loads.
        threading.Thread(target=self._announce, name="mcp-tokens-ready", daemon=True).start()
        try:
            while (read := self._read_job()) is not None:
                job, request, response, size = read
                del read
                self._waiter.begin(job.end_ns / 1e9)
                self._waiter.wait()
                if time.time() - job.end_ns / 1e9 > self._pacing.answer_within_s:
                    continue  # given up by the worker already (counted there as overload)
                findings = self._findings_of(job, request, response)
                del request, response
                if size >= self._pacing.trim_after_bytes and self._trim is not None:
                    self._trim(0)  # a large job's memory goes back to the system
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
        try:
            with contextlib.suppress(OSError):
                self._send(channel.READY, self._analyst.status())
        finally:
            self._announced.set()

    def _send(self, kind: bytes, value: object) -> None:
        data = channel.message(kind, value)
        with self._write_lock:
            self._findings.write(data)

    def _read_job(self) -> tuple[Job, object, object, int] | None:
        """The next job, its request and response, and the bytes of its frames; None at the end."""
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


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim: after a large payload is freed, glibc keeps the memory in its
    arenas for the next allocation (and its dynamic mmap threshold moves large blocks there
    too); the helper may go idle for hours, so it gives it back. None elsewhere."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
        return trim
    return None


class _Undecodable:
    """A payload the helper could not parse back (kept apart from any payload value)."""

    def __init__(self, error: str) -> None:
        self.error = error
