# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A counting process of the service: its clients' jobs, one at a time, in turn.

The supervisor forks these after loading the tokenizer, so its tables are shared
copy-on-write. Each accepts clients on the shared counting socket (the kernel hands a new
one to a process waiting in accept: an idle one first) and serves them on one thread at
the lowest CPU priority (SCHED_IDLE: only CPU time nobody else wants).

A client is read only up to its next complete job: the rest waits in its socket and in its
own bounded queue, so this process holds one job per client at most, and clients with a
job take turns, so a busy one cannot starve the others. Each client has an
`Analyst` of its own (settings, labels, budget ledgers) over the process's `Counters`. A
process without clients for the idle timeout exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable

from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters, Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings

from . import protocol
from .address import is_own_user

_logger = logging.getLogger(__name__)

_READ_BYTES = 1 << 20
_LOOK_S = 1.0  # how often an idle process looks at its parent and its idle time
_TRIM_AFTER_BYTES = 1 << 20  # after a job this large, freed memory goes back to the system
_DROPPED = (OSError, ValueError, EOFError, TypeError, pickle.UnpicklingError)  # a client that is not ours


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = protocol.FrameReader()
        self.analyst: Analyst | None = None
        self.out = bytearray()
        self.events = selectors.EVENT_READ  # what the selector watches (0: not registered)
        self.job: Job | None = None
        self.payloads = protocol.PayloadBuilder()

    @property
    def complete(self) -> bool:
        return self.job is not None and self.payloads.done

    def take_frame(self, kind: bytes, body: bytes, counters: Counters) -> None:
        """One frame; raises ValueError (or UnpicklingError) for one no client of ours sends."""
        if kind == protocol.HELLO and self.analyst is None:
            settings = protocol.loads_plain(body)
            if not isinstance(settings, Settings):
                raise ValueError("a HELLO without settings")
            self.analyst = Analyst(settings, counters)
            self.out += protocol.message(protocol.READY, counters.status)
        elif kind == protocol.JOB and self.job is None and self.analyst is not None:
            self.job = protocol.loads_plain(body)
            if not isinstance(self.job, Job):
                raise ValueError("a JOB without a job")
        elif self.job is not None:
            self.payloads.add(kind, body)
        else:
            raise ValueError(f"unexpected frame {kind!r}")

    def count(self) -> int:
        """Analyse the complete job; the bytes it took."""
        assert self.job is not None and self.analyst is not None
        job, payloads, self.job, self.payloads = self.job, self.payloads, None, protocol.PayloadBuilder()
        try:
            request, response = payloads.build()
            findings = self.analyst.analyse(job, request, response)
        except (*_DROPPED, RecursionError) as exc:  # not a payload we can read: a failed analysis
            findings = self.analyst.failed(job, type(exc).__name__)
        self.out += protocol.message(protocol.FINDINGS, findings)
        return payloads.size


class CountingLoop:
    def __init__(self, listener: socket.socket, counters: Counters, idle_s: float) -> None:
        self._listener = listener
        self._counters = counters
        self._idle_s = idle_s
        self._selector = selectors.DefaultSelector()
        self._clients: deque[_Client] = deque()  # in turn order
        self._trim = malloc_trim()

    def run(self, parent: int) -> None:
        """Serve until the parent dies, or no client came for `idle_s`."""
        self._listener.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ)
        last_client = time.monotonic()
        while os.getppid() == parent:
            if self._clients:
                last_client = time.monotonic()
            elif time.monotonic() - last_client >= self._idle_s:
                return
            turn = self._next_turn()
            for key, events in self._selector.select(0 if turn else _LOOK_S):
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._serve(key.data, events & selectors.EVENT_READ)
            if turn is not None and turn in self._clients:
                size = turn.count()
                if size >= _TRIM_AFTER_BYTES and self._trim is not None:
                    self._trim(0)
                self._serve(turn, read=False)  # frames of its next job may be in hand already

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

    def _serve(self, client: _Client, read: int) -> None:
        try:
            if read:
                data = client.sock.recv(_READ_BYTES)
                if not data:
                    raise EOFError("the client left")
                client.reader.feed(data)
            while not client.complete and (found := client.reader.next_frame()) is not None:
                client.take_frame(*found, self._counters)
            if client.out:
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    del client.out[: client.sock.send(client.out)]
            self._watch(client)
        except (BlockingIOError, InterruptedError):
            pass
        except _DROPPED as exc:
            _logger.debug("mcp-tokens counter: dropping a client (%s)", exc)
            self._drop(client)

    def _watch(self, client: _Client) -> None:
        """Read while the client's next job is incomplete; write while findings wait."""
        events = (0 if client.complete else selectors.EVENT_READ) | (
            selectors.EVENT_WRITE if client.out else 0
        )
        if events != client.events:
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


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim: glibc keeps a large payload's freed memory for the next one, and
    a counting process may go idle for hours, so it gives it back. None elsewhere."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
        return trim
    return None


def lower_priority() -> None:
    """SCHED_IDLE where the kernel has it (Linux), else nice 19."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.nice(19)
