# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The counting service: one per user and tokenizer, started by the first client that needs it.

A client that finds none starts `main` (its interpreter, isolated, with its `sys.path`)
and connects; later clients find the running one. The service:

1. takes the lock file: if another service holds it, that one serves and this one exits,
   so two never run for one user and tokenizer; the kernel frees the lock of a process
   that died, so a crashed service's sockets are simply replaced;
2. binds its counting and guard sockets (mode 0600) and detaches: the client that started
   it waits for nothing more (`ps` and `top` show it as `mcp-tokens-svc`);
3. loads the tokenizer once, settles its heap and forks `COUNTER_PROCESSES` counting
   processes (counter.py, `mcp-tokens-cnt`), which share the tokenizer's tables
   copy-on-write;
4. supervises at normal priority, answering the guard meanwhile (guard_server.py): the
   guard decides on the response path and must not wait behind counting. A counting
   process exits when it has had no client for `COUNTER_IDLE_TIMEOUT`; while none runs,
   the supervisor watches the counting socket and forks one for the next client, and it
   exits once neither counting nor the guard has had a client for that long.
"""

from __future__ import annotations

import contextlib
import ctypes
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
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters, Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.os_names import COUNTER, SERVICE, name_this_thread

from .address import Address, ensure_directory
from .counter import CountingLoop, lower_priority
from .guard_server import GuardServer

_logger = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
_LOOK_S = 1.0


def main() -> int:
    """Entry point: argv[1] is the JSON the client passes (client.start_service)."""
    try:
        request = json.loads(sys.argv[1])
        address = Address(Path(request["directory"]), str(request["name"]))
        spec = TokenizerSpec(*request["spec"])
        processes, idle_s = int(request["processes"]), float(request["idle_timeout"])
    except (IndexError, KeyError, TypeError, ValueError) as exc:
        print(f"mcp-tokens counting service: bad arguments ({exc})", file=sys.stderr)
        return 2
    _detach_from_the_starter()
    ensure_directory(address)
    lock = os.open(address.lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # a live service holds it
    counting, guard = _listen(address.socket), _listen(address.guard_socket)
    if os.fork():
        os._exit(0)  # the client that started us waits for this; the service lives on
    name_this_thread(SERVICE)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(message)s")
    try:
        Supervisor(spec, counting, guard, processes, idle_s).run()
    finally:
        for path in (address.socket, address.guard_socket):
            with contextlib.suppress(OSError):
                os.unlink(path)
    return 0


def _detach_from_the_starter() -> None:
    """Outlive the process that started the service, but stay in its session.

    A process group of its own keeps job control (a terminal's Ctrl-C, a supervisor killing
    the starter's group) from reaching the service, and it ignores the hang-up and interrupt
    signals a closing terminal sends. It does not start a session: where the kernel groups
    scheduling by session (autogroup), a new session would be a group of its own that gets
    an equal share of the CPU against the application's, whatever the priority of the
    processes in it; within the application's session, SCHED_IDLE counting yields to it."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _listen(path: Path) -> socket.socket:
    """A listening socket at `path` (the lock proves a socket left there is a dead one's)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)  # created 0600: no moment in which another user may connect
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(old_mask)
    listener.listen(128)
    return listener


class Supervisor:
    def __init__(
        self,
        spec: TokenizerSpec,
        counting: socket.socket,
        guard: socket.socket,
        processes: int,
        idle_s: float,
    ) -> None:
        self._counting = counting
        self._processes = processes
        self._idle_s = idle_s
        self._stopping = False
        self._children: set[int] = set()
        # Loaded before any thread or fork: the counting processes inherit it.
        self._counters = Counters.load(spec, threads=1)
        self._guard = GuardServer(guard, self._counters.tokenizer)
        _settle_heap(self._counters)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        for _ in range(self._processes):
            self._fork()
        selector = selectors.DefaultSelector()
        self._guard.register(selector)
        self._counting.setblocking(False)
        try:
            while not self._stopping:
                self._reap()
                watching = self._counting in selector.get_map()
                if not self._children and not watching:
                    if (
                        not self._guard.clients
                        and time.monotonic() - self._guard.last_activity >= self._idle_s
                    ):
                        return
                    selector.register(self._counting, selectors.EVENT_READ)  # a client, and none to serve it
                elif self._children and watching:
                    selector.unregister(self._counting)
                for key, events in selector.select(_LOOK_S):
                    if key.fileobj is self._counting:
                        self._fork()
                    else:
                        self._guard.handle(selector, key, events)
        finally:
            for pid in self._children:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _fork(self) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid:
            self._children.add(pid)
            return
        code = 0
        try:
            _die_with(parent)
            name_this_thread(COUNTER)
            self._guard.close_in_child()
            lower_priority()
            CountingLoop(self._counting, self._counters, self._idle_s).run(parent)
        except BaseException:
            _logger.exception("mcp-tokens: a counting process failed")
            code = 1
        finally:
            os._exit(code)

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._children.discard(pid)
            if status:  # its clients reconnect; the counting socket then starts another
                _logger.warning("mcp-tokens: counting process %d exited (status %d)", pid, status)


def _settle_heap(counters: Counters) -> None:
    """Make the heap the counting processes share as final as it can be before they fork:
    one analysis of a sample imports what the engine imports lazily and compiles its patterns
    here, once, and the surviving objects leave the collector's generations, so collections
    in the children do not touch (and copy) their pages."""
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
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(0)
