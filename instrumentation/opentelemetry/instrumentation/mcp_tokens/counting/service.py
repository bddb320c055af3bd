# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The counting service: one per user and tokenizer, started by the first client that needs it.

A client that finds no service starts this module's `main` (the client's interpreter,
isolated, with its `sys.path`) and connects; the others connect to the running one. The
service:

1. takes the lock file (flock): if another service holds it, that one serves, and this
   one exits at once, so two never run for the same user and tokenizer; a lock is freed
   by the kernel when its holder dies, so a crashed service's socket is simply replaced;
2. binds its two sockets (counting, guard), readable by its user only, and detaches (the
   client that started it waits only for that);
3. loads the tokenizer once, freezes the heap it built (`gc.freeze`: collections in the
   counting processes leave those pages alone), and forks the counting processes
   (counter.py), which share the tables copy-on-write and count at idle priority;
4. supervises at normal priority: answers the guard's requests (the guard decides on the
   response path and must not wait behind counting), replaces a counting process that
   died, and exits once no client has been connected for `COUNTER_IDLE_TIMEOUT`.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import os
import selectors
import signal
import socket
import sys
import time
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters, Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec

from .address import Address, ensure_directory
from .counter import run_counting_process
from .guard_server import GuardServer
from .slots import Slots

_logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_LOOK_S = 1.0
# Pauses before replacing a counting process that died: doubling, up to the last.
_FIRST_RESPAWN_S = 0.5
_MAX_RESPAWN_S = 30.0


def main() -> int:
    """Entry point: argv[1] is the JSON the client passes (see client.start_service)."""
    try:
        request = json.loads(sys.argv[1])
        address = Address(_path(request["directory"]), str(request["name"]))
        spec = TokenizerSpec(*request["spec"])
        processes, idle_s = int(request["processes"]), float(request["idle_timeout"])
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        print(f"mcp-tokens counting service: bad arguments ({exc})", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ensure_directory(address)
    lock = _take_lock(address)
    if lock is None:
        return 0  # a live service holds it
    listeners = (_listen(address.socket), _listen(address.guard_socket))
    if os.fork():
        os._exit(0)  # the client that started us waits for this; the service lives on
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(message)s")
    try:
        Supervisor(address, spec, listeners, processes, idle_s).run()
    finally:
        _unlink(address)
        os.close(lock)
    return 0


def _path(value: object) -> Any:
    from pathlib import Path  # noqa: PLC0415 -- the service's start only

    return Path(str(value))


def _take_lock(address: Address) -> int | None:
    fd = os.open(address.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _listen(path: os.PathLike[str]) -> socket.socket:
    """A listening socket at `path` (the lock proves a socket left there is a dead one's)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # created 0600: no window in which another user may connect
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(old_mask)
    listener.listen(128)
    return listener


def _unlink(address: Address) -> None:
    for path in (address.socket, address.guard_socket):
        with contextlib.suppress(OSError):
            os.unlink(path)


class Supervisor:
    def __init__(
        self,
        address: Address,
        spec: TokenizerSpec,
        listeners: tuple[socket.socket, socket.socket],
        processes: int,
        idle_s: float,
    ) -> None:
        self._counting, guard_listener = listeners
        self._idle_s = idle_s
        self._stopping = False
        self._slots = Slots(processes)
        self._children: dict[int, int] = {}  # pid -> slot
        self._respawn: dict[int, tuple[float, float]] = {}  # slot -> (when, next pause)
        # Loaded before any thread or fork: the counting processes inherit it.
        self._counters = Counters.load(spec, threads=1)
        self._guard = GuardServer(guard_listener, self._counters.tokenizer)
        _settle_heap(self._counters)
        for slot in range(processes):
            self._spawn(slot)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        selector = selectors.DefaultSelector()
        self._guard.register(selector)
        try:
            while not self._stopping and not self._idle():
                for key, events in selector.select(_LOOK_S):
                    self._guard.handle(selector, key, events)
                self._reap()
        finally:
            for pid in list(self._children):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self._reap()

    def _stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _idle(self) -> bool:
        if self._slots.clients() or self._guard.clients:
            return False
        last = max(self._slots.last_activity(), self._guard.last_activity)
        return time.monotonic() - last >= self._idle_s

    def _spawn(self, slot: int) -> None:
        self._slots.set_clients(slot, 0)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _die_with(parent)
                self._guard.close_in_child()
                run_counting_process(self._counting, self._counters, self._slots, slot, parent)
            except BaseException:
                _logger.exception("mcp-tokens counting process failed")
                code = 1
            finally:
                os._exit(code)
        self._children[pid] = slot

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            slot = self._children.pop(pid, None)
            if slot is not None and not self._stopping:
                _logger.warning(
                    "mcp-tokens: counting process %d exited (status %d); replacing it", pid, status
                )
                self._schedule_respawn(slot)
        now = time.monotonic()
        for slot, (when, _) in list(self._respawn.items()):
            if when <= now and slot not in self._children.values() and not self._stopping:
                self._spawn(slot)

    def _schedule_respawn(self, slot: int) -> None:
        _, pause = self._respawn.get(slot, (0.0, _FIRST_RESPAWN_S))
        self._respawn[slot] = (time.monotonic() + pause, min(_MAX_RESPAWN_S, 2 * pause))


def _settle_heap(counters: Counters) -> None:
    """Make the heap the counting processes will share as final as it can be before they
    fork: one analysis of a sample imports what the engine imports lazily and compiles its
    patterns here, once, and the surviving objects leave the collector's generations, so
    collections in the children do not touch (and copy) their pages."""
    sample = {"content": [{"type": "text", "text": 'Sample {"rows": [1, 2]}\u200b ' * 64}]}
    job = Job(
        0, "server", "tools/call", "t", "s", None, 0, PayloadKind.TOOL_ARGUMENTS, PayloadKind.TOOL_RESULT
    )
    Analyst(Settings(), counters).analyse(job, {"q": "sample"}, sample)
    gc.collect()
    gc.freeze()


def _die_with(parent: int) -> None:
    """Be killed by the kernel as soon as the supervisor dies (Linux), whatever we are doing."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError, TypeError):
            import ctypes  # noqa: PLC0415 -- a counting process's start only

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)
