# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A counting process of the service: analyses its clients' jobs, one at a time, in turn.

The service's supervisor forks these once it has loaded the tokenizer, so its tables are
shared, copy-on-write, by every counting process. Each accepts connections on the shared
counting socket (the kernel hands each new client to one of them; an idle one takes it
first) and serves its clients with one thread, at the lowest CPU priority the kernel has
(SCHED_IDLE: it runs only on CPU time nobody else wants).

A client's bytes are read only up to its next complete job: the rest waits in the socket
and in the client's own bounded queue, so this process holds at most one job per client,
and clients with a job take turns (round robin), so a busy client cannot starve the
others. A client that disconnects is forgotten with everything it had sent. Each client
gets an `Analyst` of its own (its settings, labels and budget ledgers) over the process's
shared `Counters`.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import selectors
import socket
from collections import deque
from collections.abc import Callable

from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters, Findings, Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings

from . import protocol
from .address import is_own_user
from .slots import Slots

_logger = logging.getLogger(__name__)

_READ_BYTES = 1 << 20
# The supervisor is looked for this often while there is nothing to count.
_LOOK_S = 1.0
# After a job of at least this many bytes, freed memory goes back to the system.
_TRIM_AFTER_BYTES = 1 << 20


class _Client:
    """One connected client process, and its job in the making."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = protocol.FrameReader()
        self.analyst: Analyst | None = None
        self.out = bytearray()
        self.events = selectors.EVENT_READ  # what the selector watches (0: not registered)
        self.job: Job | None = None
        # The request's and the response's builders (None when the job has no such payload).
        self.parts: list[protocol.PayloadBuilder | None] = []
        self.size = 0  # bytes of the job so far

    @property
    def complete(self) -> bool:
        return self.job is not None and not self._unfilled()

    def _unfilled(self) -> list[protocol.PayloadBuilder]:
        return [part for part in self.parts if part is not None and not part.done]

    def take_frame(self, kind: bytes, body: bytes, counters: Counters) -> None:
        """One frame of the client; raises ValueError (or UnpicklingError) for one that no
        client of ours sends, which drops the client."""
        self.size += len(body)
        if kind == protocol.HELLO and self.analyst is None:
            settings = protocol.loads_plain(body)
            if not isinstance(settings, Settings):
                raise ValueError("a HELLO without settings")
            self.analyst = Analyst(settings, counters)
            self.out += protocol.message(protocol.READY, counters.status)
        elif kind == protocol.JOB and self.job is None and self.analyst is not None:
            job, has_request, has_response = protocol.loads_plain(body)
            if not isinstance(job, Job):
                raise ValueError("a JOB without a job")
            self.job, self.size = job, len(body)
            self.parts = [
                protocol.PayloadBuilder() if present else None for present in (has_request, has_response)
            ]
        elif self.job is not None and (pending := self._unfilled()):
            pending[0].add(kind, body)
        else:
            raise ValueError(f"unexpected frame {kind!r}")

    def take_job(self) -> tuple[Job, object, object, int]:
        """The complete job, its request and response, and its size; ready for the next."""
        assert self.job is not None
        job, parts, size = self.job, self.parts, self.size
        self.job, self.parts, self.size = None, [], 0
        request, response = (_built(part) for part in parts)
        return job, request, response, size


def _built(part: protocol.PayloadBuilder | None) -> object:
    if part is None:
        return None
    try:
        return part.build()
    except (ValueError, RecursionError, pickle.UnpicklingError) as exc:
        return _Undecodable(type(exc).__name__)


class _Undecodable:
    """A payload that could not be put back together (kept apart from any payload value)."""

    def __init__(self, error: str) -> None:
        self.error = error


class CountingLoop:
    def __init__(self, listener: socket.socket, counters: Counters, slots: Slots, index: int) -> None:
        self._listener = listener
        self._counters = counters
        self._slots = slots
        self._index = index
        self._selector = selectors.DefaultSelector()
        self._clients: deque[_Client] = deque()  # in turn order
        self._trim = _malloc_trim()

    def run(self, parent: int) -> None:
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        while os.getppid() == parent:
            turn = self._next_turn()
            for key, events in self._selector.select(0 if turn else _LOOK_S):
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._serve(key.data, events)
            if turn is not None and turn in self._clients:
                self._count(turn)

    def _next_turn(self) -> _Client | None:
        """The next client with a complete job, moved to the back of the line."""
        for _ in range(len(self._clients)):
            client = self._clients[0]
            self._clients.rotate(-1)
            if client.complete:
                return client
        return None

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return  # another counting process took it
        if not is_own_user(sock):
            sock.close()
            return
        sock.setblocking(False)
        client = _Client(sock)
        self._clients.append(client)
        self._selector.register(sock, client.events, client)
        self._slots.set_clients(self._index, len(self._clients))

    def _serve(self, client: _Client, events: int) -> None:
        try:
            if events & selectors.EVENT_READ:
                self._read(client)
            self._write(client)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            _logger.debug("mcp-tokens counter: dropping a client (%s)", exc)
            self._drop(client)

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            raise EOFError("the client closed its connection")
        client.reader.feed(data)
        self._parse(client)

    def _parse(self, client: _Client) -> None:
        """Frames already read, up to the end of the client's next job."""
        while not client.complete and (found := client.reader.next_frame()) is not None:
            client.take_frame(*found, self._counters)

    def _write(self, client: _Client) -> None:
        if client.out:
            try:
                sent = client.sock.send(client.out)
            except (BlockingIOError, InterruptedError):
                sent = 0
            del client.out[:sent]
        self._watch(client)

    def _watch(self, client: _Client) -> None:
        """Read while the client's next job is incomplete; write while findings wait."""
        events = (0 if client.complete else selectors.EVENT_READ) | (
            selectors.EVENT_WRITE if client.out else 0
        )
        if events == client.events:
            return
        if client.events and events:
            self._selector.modify(client.sock, events, client)
        elif events:
            self._selector.register(client.sock, events, client)
        else:
            self._selector.unregister(client.sock)
        client.events = events

    def _drop(self, client: _Client) -> None:
        with contextlib.suppress(ValueError):
            self._clients.remove(client)
        if client.events:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(client.sock)
        client.sock.close()
        self._slots.set_clients(self._index, len(self._clients))

    def _count(self, client: _Client) -> None:
        job, request, response, size = client.take_job()
        analyst = client.analyst
        assert analyst is not None  # a job follows the HELLO
        client.out += protocol.message(protocol.FINDINGS, _findings(analyst, job, request, response))
        del request, response
        if size >= _TRIM_AFTER_BYTES and self._trim is not None:
            self._trim(0)
        self._slots.touch(self._index)
        try:  # frames of the next job may have arrived with this one's
            self._parse(client)
            self._write(client)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            _logger.debug("mcp-tokens counter: dropping a client (%s)", exc)
            self._drop(client)


def _findings(analyst: Analyst, job: Job, request: object, response: object) -> Findings:
    for payload in (request, response):
        if isinstance(payload, _Undecodable):
            return analyst.failed(job, payload.error)
    return analyst.analyse(job, request, response)


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim: after a large payload is freed, glibc keeps the memory in its
    arenas for the next allocation; a counting process may go idle for hours, so it gives
    it back. None elsewhere."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
        return trim
    return None


def run_counting_process(
    listener: socket.socket, counters: Counters, slots: Slots, index: int, parent: int
) -> None:
    """The body of a forked counting process (it never returns to the supervisor's code)."""
    lower_priority()
    CountingLoop(listener, counters, slots, index).run(parent)


def lower_priority() -> None:
    """SCHED_IDLE where the kernel has it (Linux), else nice 19."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.nice(19)
