# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The application's side of the counting service: finding it (or starting it), talking to it.

`connect` reaches the service for a tokenizer, starting it when none answers: the first
instrumented process of a user that needs counting starts it, the others find it. The
service is this interpreter, isolated (`-I`: no PYTHON* variables, so
`opentelemetry-instrument`'s sitecustomize does not instrument it) but with this process's
`sys.path`, in a session of its own, and detached: it outlives the process that started
it and exits once no one has used it for a while.

`ServiceLink` is the worker's connection (non-blocking: the worker waits on its socket);
`RemoteMeasure` is the guard's (blocking, one question at a time, with a deadline).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.analyst import AnalystStatus, Findings, job_of
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange
from opentelemetry.instrumentation.mcp_tokens.guard.tokens import InexactCount, TokenizerUnavailable

from . import protocol
from .address import Address, ServiceUnavailable, address_of, ensure_directory, is_own_user, supported
from .options import Options


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
            start_new_session=True,
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
        self._out = bytearray(protocol.message(protocol.HELLO, settings))
        self._reader = protocol.FrameReader()
        self.status: AnalystStatus | None = None
        self.flush()

    def fileno(self) -> int:
        return self._sock.fileno()

    @property
    def unsent(self) -> int:
        """Bytes waiting to be taken by the service."""
        return len(self._out)

    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[None]:
        """Encodes one exchange's job into the outgoing bytes, a short step per `next()`."""
        job = job_of(exchange, seq, behind)
        request = exchange.request if job.request_kind is not None else None
        response = exchange.response if job.response_kind is not None else None
        for data in protocol.job_frames(job, request, response, self._options.piece_bytes):
            self._out += data
            if len(self._out) >= self._options.piece_bytes:
                self.flush()
            yield

    def flush(self) -> bool:
        """Send what the socket takes; whether everything went."""
        while self._out:
            try:
                sent = self._sock.send(self._out)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as exc:
                raise LinkClosed(f"the counting service's socket broke: {exc}") from None
            del self._out[:sent]
        return True

    def receive(self) -> list[Findings]:
        """What the service answered since the last call. Raises LinkClosed at its end."""
        ended = False
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                ended = True
                break
            if not data:
                ended = True
                break
            self._reader.feed(data)
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
        with contextlib.suppress(OSError):
            self._sock.close()

    def forget(self) -> None:
        """In a forked child: drop this process's copy of the socket (the parent's)."""
        self.close()


class RemoteMeasure:
    """The guard's exact counts and cuts (guard/tokens.py's `Measure`), asked of the service.

    Questions are answered by the service's supervisor at normal priority; one not answered
    within `answer_timeout` raises TokenizerUnavailable (the guard fails open) and the
    connection is replaced, so a late answer is never taken for the next question's."""

    def __init__(
        self,
        settings: Settings,
        *,
        connect_timeout: float,
        answer_timeout: float,
        piece_bytes: int = 64 << 10,
    ) -> None:
        self._settings = settings
        self._connect_timeout = connect_timeout
        self._timeout = answer_timeout
        self._piece_bytes = piece_bytes
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader = protocol.FrameReader()
        self.name = settings.encoding
        self.max_token_bytes = 1
        self._open()

    def _open(self) -> None:
        self._sock = connect(self._settings, self._connect_timeout, guard=True)
        self._reader = protocol.FrameReader()
        hello = self._read_answer()
        if "error" in hello:
            raise TokenizerUnavailable(f"the guard cannot cut with {self._settings.encoding}")
        self.name, self.max_token_bytes = str(hello["name"]), max(1, int(hello["max_token_bytes"]))

    def count(self, text: str) -> int:
        return int(self._ask("count", text, 0))

    def count_upto(self, text: str, budget: int) -> int | None:
        if len(text) > budget * self.max_token_bytes:
            return None  # at least len(text) / max_token_bytes tokens
        value = self._ask("count_upto", text, budget)
        return None if value is None else int(value)

    def prefix(self, text: str, budget: int) -> tuple[int, int]:
        if budget <= 0 or not text:
            return 0, 0
        # No longer prefix can fit: each token is at most that many bytes.
        chars, tokens = self._ask("prefix", text[: budget * self.max_token_bytes], budget)
        return int(chars), int(tokens)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _ask(self, op: str, text: str, budget: int) -> Any:
        question = json.dumps({"op": op, "budget": budget, "max_bytes": self._settings.max_bytes}).encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._open()
                assert self._sock is not None
                self._sock.sendall(protocol.frame(protocol.GUARD, question))
                for data in protocol.text_frames(text, self._piece_bytes):
                    self._sock.sendall(data)
                answer = self._read_answer()
            except (OSError, ValueError, ServiceUnavailable) as exc:
                self._drop()
                raise TokenizerUnavailable(f"the counting service did not answer the guard: {exc}") from None
        if "error" in answer:
            raise InexactCount(str(answer.get("detail") or answer["error"]))
        return answer["value"]

    def _read_answer(self) -> dict[str, Any]:
        assert self._sock is not None
        self._sock.settimeout(self._timeout)
        while (found := self._reader.next_frame()) is None:
            data = self._sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the counting service closed the guard's connection")
            self._reader.feed(data)
        kind, body = found
        answer = json.loads(body)
        if kind != protocol.ANSWER or not isinstance(answer, dict):
            raise ValueError("not an answer")
        return answer

    def _drop(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None
