# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Scrape notifications: the root tells its workers that a scrape has started, and each worker
answers once its file is written.

    r             the root's socket (AF_UNIX, SOCK_DGRAM), bound by the root
    w-<token>.s   one per worker, bound by the worker (the token is its data file's too)

A worker's thread blocks in recv() on its socket, so between scrapes a worker runs nothing: no
timer, no wake-up, whether or not it ever serves MCP. On a scrape the root sends the scrape's
generation (8 bytes) from its socket to every worker socket in the directory; each worker
writes its file and answers with the generation and its socket's name; the root waits for the
answers in poll(), bounded by the scrape's wait. A send refused with ECONNREFUSED found a name
nobody is bound to: its worker has exited, however it died, so the root removes the name (its
data file is folded by the lock test, tree.py).

Why datagrams: one message each way per scrape, no connection to accept or tear down, and a
send to a dead worker fails at once. Sends never block. A worker whose queue is full (stuck)
is not waited for; a worker whose answer finds the root's queue full (more workers than
`net.unix.max_dgram_qlen`, 10 by default on Linux) retries while the root is still waiting.

Addresses: `sun_path` holds 104 bytes on macOS and the BSDs (108 on Linux), terminator
included. A directory too deep for that is reached on Linux through /proc/self/fd/<a
descriptor of the directory>, which each process opens for itself. Elsewhere, and where
AF_UNIX datagrams are missing (Windows), the processes fall back to polling the scrape file.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import select
import socket
import struct
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT_SOCKET = "r"
# Whether this platform has what the notifications need; False: the processes poll.
AVAILABLE = hasattr(socket, "AF_UNIX") and hasattr(socket, "MSG_DONTWAIT") and hasattr(select, "poll")
_GENERATION = struct.Struct("<Q")
# Room for the longest name in the directory: "w-" + a pid + "-" + 8 hex digits + ".s".
_LONGEST_NAME = 32
# `sun_path`'s size on macOS and the BSDs, its terminator included (Linux has 108).
_SUN_PATH = 104
_PROC_FD = Path("/proc/self/fd")
_MAX_DATAGRAM = 256
# How long a worker retries an answer the root's full queue refused (the root waits as long).
ANSWER_RETRY_S = 0.5
_ANSWER_RETRY_STEP_S = 0.002


class Addresses:
    """Socket addresses of names in one directory, as this process passes them to bind() and
    sendto(): the path itself when it fits, else through a descriptor of the directory."""

    def __init__(self, directory: Path) -> None:
        self._fd: int | None = None
        prefix = os.fsencode(directory) + b"/"
        if len(prefix) + _LONGEST_NAME >= _SUN_PATH:
            if not _PROC_FD.is_dir():
                raise OSError(errno.ENAMETOOLONG, "too long for a socket address", str(directory))
            self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            prefix = os.fsencode(_PROC_FD) + b"/%d/" % self._fd
        self._prefix = prefix

    def of(self, name: str) -> bytes:
        return self._prefix + name.encode()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _bound(directory: Path, name: str) -> tuple[Addresses, socket.socket]:
    """This process's addresses in `directory`, and a datagram socket bound to `name` there."""
    addresses = Addresses(directory)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(addresses.of(name))
    except OSError:
        sock.close()
        addresses.close()
        raise
    return addresses, sock


class Bell:
    """The root's end: rings the workers and waits for their answers (one thread at a time)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._addresses, self._socket = _bound(directory, ROOT_SOCKET)
        self._socket.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self._socket, select.POLLIN)

    def ring(self, generation: int, names: Iterable[str]) -> set[str]:
        """Send `generation` to each named worker socket; the names that received it."""
        for _ in self._answers():
            pass  # late answers to an earlier scrape
        message = _GENERATION.pack(generation)
        rung = set()
        for name in names:
            try:
                self._socket.sendto(message, self._addresses.of(name))
            except ConnectionRefusedError:
                with contextlib.suppress(OSError):
                    (self._directory / name).unlink()
            except OSError:
                continue  # gone meanwhile, closing, or stuck with a full queue
            else:
                rung.add(name)
        return rung

    def wait(self, generation: int, pending: set[str], deadline: float) -> set[str]:
        """Wait until every pending worker has answered `generation`, or until the monotonic
        `deadline`; the names still pending."""
        pending = set(pending)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._poll.poll(math.ceil(remaining * 1000)):
                break
            for answered, name in self._answers():
                if answered == generation:
                    pending.discard(name)
        return pending

    def _answers(self) -> Iterator[tuple[int, str]]:
        while True:
            try:
                data = self._socket.recv(_MAX_DATAGRAM)
            except OSError:
                return  # nothing more queued
            if len(data) > _GENERATION.size:
                yield _GENERATION.unpack_from(data)[0], data[_GENERATION.size :].decode(errors="replace")

    def close(self) -> None:
        """Close this process's descriptors (the name goes with the directory)."""
        self._socket.close()
        self._addresses.close()


class Doorbell:
    """A worker's end: blocks until the root rings, answers once the worker's file is written.
    One thread waits; any thread may wake it."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self._path = directory / name
        self._addresses, self._socket = _bound(directory, name)
        self._root = self._addresses.of(ROOT_SOCKET)

    def wait(self) -> int | None:
        """Block until rung; the newest generation rung since (scrapes that queued up while this
        worker was busy are answered once). None once `wake` was called."""
        generation: int | None = None
        flags = 0
        while True:
            try:
                data = self._socket.recv(_MAX_DATAGRAM, flags)
            except BlockingIOError:
                return generation
            except OSError:
                return None
            if not data:
                return None  # woken (or the socket was shut down)
            if len(data) == _GENERATION.size:
                generation = _GENERATION.unpack(data)[0]
                flags = socket.MSG_DONTWAIT

    def answer(self, generation: int) -> None:
        message = _GENERATION.pack(generation) + self.name.encode()
        deadline = time.monotonic() + ANSWER_RETRY_S
        while True:
            try:
                self._socket.sendto(message, socket.MSG_DONTWAIT, self._root)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(_ANSWER_RETRY_STEP_S)
            except OSError:
                return  # the root has gone

    def wake(self) -> None:
        """Make the thread blocked in `wait` return None. Never in a forked child: shutdown()
        acts on the socket the parent shares, not on this process's descriptor."""
        try:
            self._socket.shutdown(socket.SHUT_RD)
        except OSError:
            # Where an unconnected socket cannot be shut down: an empty datagram to itself.
            with contextlib.suppress(OSError):
                self._socket.sendto(b"", socket.MSG_DONTWAIT, self._addresses.of(self.name))

    def unlink(self) -> None:
        """Remove the name, so that the root rings this worker no more."""
        with contextlib.suppress(OSError):
            self._path.unlink()

    def close(self) -> None:
        """Close this process's descriptors."""
        self._socket.close()
        self._addresses.close()
