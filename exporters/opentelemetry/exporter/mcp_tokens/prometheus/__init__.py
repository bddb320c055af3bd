# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp_tokens_prometheus`: the Prometheus endpoint for single- and multi-process servers.

    opentelemetry-instrument --metrics_exporter mcp_tokens_prometheus uvicorn app:app --workers 4
    opentelemetry-instrument --metrics_exporter mcp_tokens_prometheus \\
        gunicorn -k uvicorn_worker.UvicornWorker -w 4 app:app

One endpoint (`OTEL_EXPORTER_PROMETHEUS_HOST`:`OTEL_EXPORTER_PROMETHEUS_PORT`, default
localhost:9464, as the stock `prometheus` exporter) serves the series of every process of the
server, with the stock exporter's names and labels. In a single process it serves that
process's series, exactly as the stock exporter does.

How: the first instrumented process of a process tree (the one that runs
`opentelemetry-instrument`: uvicorn's supervisor, gunicorn's master, or the only process) is
the *root*. It binds the port, creates a private directory (`tree.py`) and names it in an
environment variable that every process it starts inherits: uvicorn's spawned workers, which
run `opentelemetry-instrument`'s start-up again, and gunicorn's forked workers, which switch
roles after the fork. A worker never binds the port. Each worker binds a datagram socket in
the directory and one thread of it blocks in recv() there (`notify.py`): between scrapes a
worker costs no CPU and no wake-up, whether or not it ever serves MCP. When the root is scraped
it sends the scrape's generation number to every worker socket; each worker writes its
cumulative series to its own file (`store.py`, only the values that changed) and answers. The
root waits for the answers (at most half a second), reads the files, and merges them with its
own series (`merge.py`): counters and histograms summed over every process, exited ones
included; the tool-definition gauge taken from the listing seen last, not multiplied by the
number of workers. The root removes the directory at exit; a later root removes those of
servers that crashed.

Where AF_UNIX datagram sockets are missing (Windows), or the directory's path is too long for
a socket address outside Linux, the workers poll a generation file instead (every 0.1 s, an
8-byte read) and a scrape waits at least 0.15 s for them.

A process that never records a metric writes no file. A process that exits flushes its series
at shutdown, so a short-lived one (a stdio server that ends before any scrape) still counts. A
port that is taken is one warning that names the setting to change, and this process tree then
exports nothing through this exporter; the application runs on.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_PROMETHEUS_HOST,
    OTEL_EXPORTER_PROMETHEUS_PORT,
)
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric

from . import notify
from .merge import Archive, ChangeClock, Policy, Stamped, merge, policy
from .notify import Bell, Doorbell
from .samples import SampleKey, flatten, rebuild
from .store import KeyCache, WorkerStore, read_generation, read_worker_file
from .tree import Tree, held_elsewhere, remove_stale, try_lock, worker_socket_name, worker_token

_logger = logging.getLogger(__name__)

# Set by the root for the processes it starts: the directory, or "" when the root serves nothing.
TREE_ENV = "_OTEL_EXPORTER_MCP_TOKENS_PROMETHEUS_TREE"
# Where the root creates its directory (default: the system's temporary directory).
DIR_ENV = "OTEL_EXPORTER_MCP_TOKENS_PROMETHEUS_DIR"
DEFAULT_HOST = "localhost"
DEFAULT_PORT = 9464
# How long a scrape waits for the workers' answers; how often a polling worker looks for a scrape.
ANSWER_WAIT_S = 0.5
POLL_S = 0.1
_STOP_WAIT_S = 2.0


class McpTokensPrometheusReader(PrometheusMetricReader):
    """The `mcp_tokens_prometheus` metrics exporter (a pull reader, as the stock `prometheus`)."""

    def __init__(self) -> None:
        self._own = CollectorRegistry()
        super().__init__(registry=self._own)
        self._collect_lock = threading.Lock()
        self._baseline: dict[SampleKey, float] = {}
        self._at_fork: dict[SampleKey, float] = {}
        self.clock = ChangeClock()
        self.role: _Role = _Off()
        try:
            self.role = self._start_role()
        except Exception:
            _logger.warning("mcp-tokens: the Prometheus exporter could not start", exc_info=True)
        _register_fork_hooks(self)

    @property
    def address(self) -> tuple[str, int] | None:
        """Where this process serves the endpoint (None: it does not, e.g. a worker)."""
        role = self.role
        if isinstance(role, _Root) and role.server is not None:
            host, port = role.server.server_address[:2]
            return str(host), int(port)
        return None

    # --- this process's own series -----------------------------------------------------
    def collect_raw(self) -> tuple[list[Metric], dict[SampleKey, float]]:
        with self._collect_lock:
            return flatten(self._own.collect())

    def own_samples(self) -> tuple[list[Metric], dict[SampleKey, float]]:
        """This process's series, less what a forked child inherited from its parent (the
        parent counts that itself)."""
        info, values = self.collect_raw()
        if self._baseline:
            for key, value in values.items():
                inherited = self._baseline.get(key)
                if inherited is not None and policy(key.family) is Policy.SUM:
                    values[key] = value - inherited
        return info, values

    # --- roles -------------------------------------------------------------------------
    def _start_role(self) -> _Role:
        inherited = os.environ.get(TREE_ENV)
        if inherited == "":
            return _Off()  # the root could not serve; it said so
        if inherited is not None and Tree(Path(inherited)).alive():
            return _Worker(self, Tree(Path(inherited)))
        return _Root.start(self)

    def before_fork(self) -> None:
        if isinstance(self.role, (_Root, _Worker)):
            try:
                self._at_fork = self.collect_raw()[1]
            except Exception:
                self._at_fork = {}

    def after_fork_in_child(self) -> None:
        self._collect_lock = threading.Lock()
        parent_role, self.role = self.role, _Off()
        parent_role.leave_in_child()
        self._baseline, self._at_fork = self._at_fork, {}
        if isinstance(parent_role, (_Root, _Worker)) and parent_role.tree is not None:
            self.role = _Worker(self, parent_role.tree)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        role, self.role = self.role, _Off()
        try:
            role.stop()
        except Exception:
            _logger.debug("mcp-tokens Prometheus exporter: stopping failed", exc_info=True)
        super().shutdown(timeout_millis, **kwargs)


class _Role:
    tree: Tree | None = None

    def stop(self) -> None:
        """At shutdown."""

    def leave_in_child(self) -> None:
        """In a forked child, before it takes its own role: let go of the parent's resources."""


class _Off(_Role):
    """Serves and writes nothing (the port was taken, or this process is shut down)."""


class _Root(_Role):
    """Serves the endpoint: its own series merged with every worker's."""

    def __init__(self, reader: McpTokensPrometheusReader, tree: Tree | None, lock_fd: int | None) -> None:
        self.reader = reader
        self.tree = tree
        self._lock_fd = lock_fd
        self._owner = os.getpid()
        self._archive = Archive()
        self._keys = KeyCache()
        self._scrape_lock = threading.Lock()
        self._bell = _open_bell(tree)
        self.server: Any = None

    @classmethod
    def start(cls, reader: McpTokensPrometheusReader) -> _Role:
        host = os.environ.get(OTEL_EXPORTER_PROMETHEUS_HOST) or DEFAULT_HOST
        port_text = os.environ.get(OTEL_EXPORTER_PROMETHEUS_PORT) or str(DEFAULT_PORT)
        try:
            port = int(port_text)
        except ValueError:
            _logger.warning(
                "mcp-tokens: %s=%r is not a port number; no Prometheus endpoint is served",
                OTEL_EXPORTER_PROMETHEUS_PORT,
                port_text,
            )
            os.environ[TREE_ENV] = ""
            return _Off()
        tree, lock_fd = _create_tree()
        root = cls(reader, tree, lock_fd)
        served = CollectorRegistry()
        served.register(_MergedCollector(root))
        try:
            root.server, _ = start_http_server(port, addr=host, registry=served)
        except OSError as error:
            root.stop()
            os.environ[TREE_ENV] = ""
            _logger.warning(
                "mcp-tokens: cannot serve Prometheus metrics on %s:%s (%s); set %s (and %s) to a free "
                "address. This process and its workers export no metrics through mcp_tokens_prometheus.",
                host,
                port,
                error.strerror or error,
                OTEL_EXPORTER_PROMETHEUS_PORT,
                OTEL_EXPORTER_PROMETHEUS_HOST,
            )
            return _Off()
        os.environ[TREE_ENV] = str(tree.path) if tree is not None else ""
        return root

    def scrape(self) -> list[Metric]:
        with self._scrape_lock:
            info, own = self.reader.own_samples()
            sources: list[dict[SampleKey, Stamped]] = [self.reader.clock.stamp(own)]
            if self.tree is not None:
                sources.extend(self._gather(self.tree))
                sources.append(self._archive.values)
            return [*info, *rebuild(merge(sources))]

    def _gather(self, tree: Tree) -> list[dict[SampleKey, Stamped]]:
        """The running workers' series once each has answered this scrape (or the wait is over);
        the files of exited workers are folded into the archive and removed."""
        generation = tree.start_scrape()
        deadline = time.monotonic() + ANSWER_WAIT_S
        if self._bell is not None:
            # A worker that could not bind a socket polls; it is not waited for, and what it
            # writes on seeing this scrape is read at the next one.
            self._bell.wait(generation, self._bell.ring(generation, tree.worker_sockets()), deadline)
        else:
            _wait_for_polling_workers(tree, generation, deadline)
        running: list[dict[SampleKey, Stamped]] = []
        for path in tree.worker_files():
            if not held_elsewhere(path):
                self._fold(path)
                continue
            try:
                running.append(read_worker_file(path, self._keys)[0])
            except (OSError, RuntimeError):
                continue
        return running

    def _fold(self, path: Path) -> None:
        lock_fd = try_lock(path)
        if lock_fd is None:
            return
        try:
            values, _ = read_worker_file(path, self._keys)
            self._archive.fold(values)
            path.unlink()
        except (OSError, RuntimeError):
            _logger.debug("mcp-tokens: could not fold %s", path, exc_info=True)
        finally:
            os.close(lock_fd)

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        with self._scrape_lock:  # a scrape still answering a request may be using the bell
            if self._bell is not None:
                self._bell.close()
                self._bell = None
        if self.tree is not None and os.getpid() == self._owner:
            self.tree.remove()
            if os.environ.get(TREE_ENV) == str(self.tree.path):
                del os.environ[TREE_ENV]
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def leave_in_child(self) -> None:
        # The listening socket is the parent's; the child keeps the tree's lock (inherited),
        # so the directory counts as alive while any process of the server runs.
        if self.server is not None:
            self.server.socket.close()
            self.server = None
        if self._bell is not None:
            self._bell.close()
            self._bell = None


def _wait_for_polling_workers(tree: Tree, generation: int, deadline: float) -> None:
    """Until every worker file shows `generation`, or the deadline."""
    started = time.monotonic()
    while True:
        waiting = any(
            read_generation(path) < generation for path in tree.worker_files() if held_elsewhere(path)
        )
        now = time.monotonic()
        # At least one poll period: a worker that recorded its first series since the last
        # scrape creates its file only when it sees this one.
        if (now - started >= POLL_S * 1.5 and not waiting) or now >= deadline:
            return
        time.sleep(0.01)


def _open_bell(tree: Tree | None) -> Bell | None:
    """The root's socket, or None: the workers poll."""
    if tree is None or not notify.AVAILABLE:
        return None
    try:
        return Bell(tree.path)
    except OSError:
        _logger.debug("mcp-tokens: no scrape notifications in %s; workers poll", tree.path, exc_info=True)
        return None


def _create_tree() -> tuple[Tree | None, int | None]:
    base = Path(os.environ.get(DIR_ENV) or tempfile.gettempdir())
    try:
        remove_stale(base)
        return Tree.create(base)
    except OSError as error:
        _logger.warning(
            "mcp-tokens: cannot create a directory in %s (%s); set %s to a writable directory. "
            "Only this process's metrics are served.",
            base,
            error.strerror or error,
            DIR_ENV,
        )
        return None, None


class _MergedCollector:
    def __init__(self, root: _Root) -> None:
        self._root = root

    def collect(self) -> Iterable[Metric]:
        try:
            return self._root.scrape()
        except Exception:
            _logger.warning("mcp-tokens: a scrape failed", exc_info=True)
            return []


class _Worker(_Role):
    """Writes this process's series to its own file whenever the root is scraped."""

    def __init__(self, reader: McpTokensPrometheusReader, tree: Tree) -> None:
        self.reader = reader
        self.tree = tree
        self._token = worker_token()
        self._store: WorkerStore | None = None
        self._flush_lock = threading.Lock()
        self._closed = False
        self._stopped = threading.Event()
        self._generation = tree.generation()
        self._doorbell = _open_doorbell(tree, self._token)
        if self._doorbell is not None:
            self._thread = threading.Thread(
                target=self._listen, args=(self._doorbell,), name="mcp-tokens-prometheus", daemon=True
            )
        else:
            self._thread = threading.Thread(target=self._poll, name="mcp-tokens-prometheus", daemon=True)
        self._thread.start()

    def _listen(self, doorbell: Doorbell) -> None:
        """Blocked in recv() until the root rings: no wake-up between scrapes."""
        while (generation := doorbell.wait()) is not None and not self._stopped.is_set():
            self._generation = generation
            self.flush()
            doorbell.answer(generation)

    def _poll(self) -> None:
        while not self._stopped.wait(POLL_S):
            generation = self.tree.generation() if self.tree is not None else -1
            if generation < 0:
                return  # the directory has gone: the server is shutting down
            if generation != self._generation:
                self._generation = generation
                self.flush()

    def flush(self) -> None:
        with self._flush_lock:
            if self._closed:
                return
            try:
                self._write()
            except Exception:
                _logger.debug("mcp-tokens: a worker flush failed", exc_info=True)

    def _write(self) -> None:
        _, values = self.reader.own_samples()
        if not values and self._store is None:
            return
        stamped = self.reader.clock.stamp(values)
        if self._store is None:
            if self.tree is None or not self.tree.path.is_dir():
                return
            self._store = WorkerStore(*self.tree.new_worker_file(self._token))
        self._store.write(stamped, self._generation)

    def stop(self) -> None:
        self._stopped.set()
        if self._doorbell is not None:
            self._doorbell.wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(_STOP_WAIT_S)
        self.flush()
        with self._flush_lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None
        if self._doorbell is not None:
            self._doorbell.unlink()
            self._doorbell.close()
            self._doorbell = None

    def leave_in_child(self) -> None:
        # Close this process's copies only: the parent goes on using its file, lock and socket.
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._doorbell is not None:
            self._doorbell.close()
            self._doorbell = None


def _open_doorbell(tree: Tree, token: str) -> Doorbell | None:
    """This worker's socket, or None: it polls (no notifications here, or the root polls)."""
    if not notify.AVAILABLE or not (tree.path / notify.ROOT_SOCKET).exists():
        return None
    try:
        return Doorbell(tree.path, worker_socket_name(token))
    except OSError:
        _logger.debug("mcp-tokens: no scrape notifications in %s; polling", tree.path, exc_info=True)
        return None


def _register_fork_hooks(reader: McpTokensPrometheusReader) -> None:
    reference = weakref.ref(reader)

    def call(method: Callable[[McpTokensPrometheusReader], None]) -> Callable[[], None]:
        def hook() -> None:
            target = reference()
            if target is not None:
                method(target)

        return hook

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(
            before=call(McpTokensPrometheusReader.before_fork),
            after_in_child=call(McpTokensPrometheusReader.after_fork_in_child),
        )
