# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The application's side of the counting service: finding it (or starting it), talking to it.

`connect` reaches the service for a tokenizer, starting it when none answers: the first
instrumented process of a user that needs counting starts it, the others find it. The
service is this interpreter, isolated (`-I`: no PYTHON* variables, so
`opentelemetry-instrument`'s sitecustomize does not instrument it) but with this process's
`sys.path`, detached in a process group of its own (service.py says why not a session):
it outlives the process that started it and exits once no one has used it for a while.

`ServiceLink` is the worker's connection (non-blocking: the worker waits on its socket);
the guard's is guard/remote.py.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pickle
import socket
import subprocess
import sys
import time
from collections import deque

from opentelemetry.instrumentation.mcp_tokens.analyst import AnalystStatus, Findings, job_of
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange

from . import protocol
from .address import Address, ServiceUnavailable, address_of, ensure_directory, is_own_user, supported
from .options import Options

# What the socket may hold (the kernel caps it), and frames per system call.
_SEND_BUFFER = 1 << 20
_SEND_VIEWS = 64
_READ_BYTES = 1 << 16


class LinkClosed(Exception):
    """The counting service went away (it exited, or was killed)."""


def spec_of(settings: Settings) -> TokenizerSpec:
    return TokenizerSpec(settings.encoding, settings.tokenizer_file, settings.tokenizer_pattern)


def connect(settings: Settings, timeout: float, *, guard: bool = False) -> socket.socket:
    """A connected socket to this user's service for the settings' tokenizer (its counting
    socket, or its guard's), starting the service if none answers. Raises
    ServiceUnavailable where none can run or it did not answer within `timeout` seconds."""
    if not supported():
        raise ServiceUnavailable("this platform has no Unix sockets with peer credentials")
    address = address_of(spec_of(settings), settings.counter_dir)
    ensure_directory(address)
    path = os.fspath(address.guard_socket if guard else address.socket)
    deadline = time.monotonic() + timeout
    started = False
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            sock.close()
            if time.monotonic() >= deadline:
                raise ServiceUnavailable(f"no counting service at {path} ({exc})") from None
            if not started:
                start_service(address, settings, deadline - time.monotonic())
                started = True
            else:
                time.sleep(0.02)
            continue
        except OSError as exc:
            sock.close()
            raise ServiceUnavailable(f"cannot reach the counting service at {path}: {exc}") from None
        if not is_own_user(sock):
            sock.close()
            raise ServiceUnavailable(f"{path} is served by another user")
        return sock


def start_service(address: Address, settings: Settings, timeout: float) -> None:
    """Start the service and wait until it listens (or another one is found to)."""
    if getattr(sys, "frozen", False) or not sys.executable:
        raise ServiceUnavailable("no Python interpreter to start the counting service with")
    spec = spec_of(settings)
    request = {
        "directory": os.fspath(address.directory),
        "name": address.name,
        "spec": [spec.encoding, spec.path and os.path.abspath(spec.path), spec.pattern],
        "processes": settings.counting_processes,
        "idle_timeout": settings.counter_idle_timeout,
    }
    paths = [os.path.abspath(path) if path else os.getcwd() for path in sys.path if _keeps(path)]
    bootstrap = (
        "import json,sys;sys.path[:0]=json.loads(sys.argv.pop(1));"
        "from opentelemetry.instrumentation.mcp_tokens.counting.service import main;sys.exit(main())"
    )
    with open(address.log, "ab") as log:
        starter = subprocess.Popen(
            [sys.executable, "-I", "-c", bootstrap, json.dumps(paths), json.dumps(request)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            close_fds=True,
        )
    try:
        starter.wait(timeout)  # it exits once the service listens (or another one does)
    except subprocess.TimeoutExpired:
        starter.kill()
        starter.wait()
        raise ServiceUnavailable("the counting service did not start in time") from None


def _keeps(path: str) -> bool:
    # opentelemetry-instrument's sitecustomize directory: nothing to import from there.
    return not path.rstrip("/\\").endswith(os.path.join("instrumentation", "auto_instrumentation"))


class ServiceLink:
    """The worker's connection: jobs out, findings in, both without blocking."""

    def __init__(self, settings: Settings, options: Options, timeout: float) -> None:
        self._options = options
        self._sock = connect(settings, timeout)
        self._sock.setblocking(False)
        with contextlib.suppress(OSError):  # the kernel caps it (net.core.wmem_max)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SEND_BUFFER)
        # Frames (or what is left of one) the socket has not taken yet, sent as they are.
        self._out: deque[memoryview] = deque()
        self._unsent = 0
        self._queue(protocol.message(protocol.HELLO, settings))
        self._reader = protocol.FrameReader()
        self.status: AnalystStatus | None = None
        self.flush()

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def unsent(self) -> int:
        """Bytes waiting to be taken by the service."""
        return self._unsent

    def _queue(self, data: bytes | memoryview) -> None:
        if data:
            self._out.append(memoryview(data))
            self._unsent += len(data)

    def send(self, exchange: Exchange, seq: int, behind: bool) -> None:
        """Queue one exchange's job; send what the socket takes once a socket's worth is
        queued (the worker flushes the rest at the end of its round: each system call
        releases the GIL, which costs a hand-over while the application wants it)."""
        job = job_of(exchange, seq, behind)
        request = exchange.request if job.request_kind is not None else None
        response = exchange.response if job.response_kind is not None else None
        for data in protocol.job_frames(job, request, response, self._options.piece_bytes):
            self._queue(data)
        if self._unsent >= _SEND_BUFFER:
            self.flush()

    def flush(self) -> None:
        """Send what the socket takes."""
        out = self._out
        while out:
            try:
                sent = self._sock.sendmsg(list(itertools.islice(out, _SEND_VIEWS)))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                raise LinkClosed(f"the counting service's socket broke: {exc}") from None
            self._unsent -= sent
            while sent and sent >= len(out[0]):
                sent -= len(out.popleft())
            if sent:
                out[0] = out[0][sent:]

    def receive(self) -> list[Findings]:
        """What the service answered since the last call. Raises LinkClosed at its end."""
        ended = False
        while True:
            try:
                data = self._sock.recv(_READ_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                ended = True
                break
            if not data:
                ended = True
                break
            self._reader.feed(data)
            if len(data) < _READ_BYTES:  # the socket is read empty: no call to learn it again
                break
        findings: list[Findings] = []
        try:
            for kind, body in self._reader.frames():
                value = pickle.loads(body)
                if kind == protocol.READY and isinstance(value, AnalystStatus):
                    self.status = value
                elif kind == protocol.FINDINGS and isinstance(value, Findings):
                    findings.append(value)
                else:
                    raise ValueError(f"a {type(value).__name__} in a {kind!r} frame")
        except (ValueError, pickle.UnpicklingError, EOFError) as exc:
            raise LinkClosed(f"the counting service sent something unreadable: {exc}") from None
        if ended and not findings:  # else the end is reported by the next call
            raise LinkClosed("the counting service closed the connection")
        return findings

    def close(self) -> None:
        """Close this process's copy of the socket (in a forked child, the parent's stays)."""
        with contextlib.suppress(OSError):
            self._sock.close()
