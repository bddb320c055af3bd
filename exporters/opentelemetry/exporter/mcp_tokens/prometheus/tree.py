# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The directory one server's processes share: who is alive, what each has counted.

Layout of `<base>/mcp-tokens-prometheus-<random>/` (mode 0700, created by the process that
serves the endpoint, the *root*, and removed by it at exit):

    tree.lock        held (flock, exclusive) by the root, and by every process forked from it
    scrape           8 bytes: how many scrapes the root has started (read by polling workers)
    r, w-<token>.s   the root's and each worker's socket, which carry the scrape notifications
                     and the answers (notify.py)
    w-<token>.db     one per worker that recorded anything: prometheus_client's mmap_dict
                     format (one writer, readers anywhere), held (flock) while the worker lives

Why locks, not pids: the kernel drops a process's locks when it dies, however it dies, and a
pid can be reused by an unrelated process. A file whose lock can be taken belongs to a process
that has exited; a directory whose `tree.lock` and worker files can all be taken belongs to a
server that has gone (crashed, killed) and is removed by the next root that starts.

Why rename: a directory or worker file becomes visible under its final name only once its lock
is held, so nobody can mistake one being created for one left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import secrets
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

_logger = logging.getLogger(__name__)

PREFIX = "mcp-tokens-prometheus-"
_NEW_PREFIX = ".new-" + PREFIX
TREE_LOCK = "tree.lock"
SCRAPE = "scrape"
WORKER_GLOB = "w-*.db"
WORKER_SOCKET_GLOB = "w-*.s"
_GENERATION = struct.Struct("<Q")
# Stale directories looked at per start, so a /tmp full of them never slows a start down.
MAX_STALE_CHECKS = 32
# A directory still named `.new-...` after this long was left by a crash during creation.
NEW_DIR_GRACE_S = 3600.0


def try_lock(path: Path) -> int | None:
    """An fd holding an exclusive lock on `path`, or None if another process holds one (or the
    file cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def held_elsewhere(path: Path) -> bool:
    fd = try_lock(path)
    if fd is None:
        return path.exists()
    os.close(fd)
    return False


class Tree:
    """One server's directory, as seen by any of its processes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    # --- the root's side ---------------------------------------------------------------
    @classmethod
    def create(cls, base: Path) -> tuple[Tree, int]:
        """A new directory under `base` and the fd holding its `tree.lock`."""
        staging = Path(tempfile.mkdtemp(prefix=_NEW_PREFIX, dir=base))
        lock_path = staging / TREE_LOCK
        lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        (staging / SCRAPE).write_bytes(_GENERATION.pack(0))
        final = base / f"{PREFIX}{secrets.token_hex(8)}"
        os.rename(staging, final)
        return cls(final), lock_fd

    def start_scrape(self) -> int:
        """Record that a scrape started (for workers that poll); returns its generation."""
        path = self.path / SCRAPE
        generation = self.generation() + 1
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.pwrite(fd, _GENERATION.pack(generation), 0)
        finally:
            os.close(fd)
        return generation

    def worker_files(self) -> list[Path]:
        return sorted(self.path.glob(WORKER_GLOB))

    def worker_sockets(self) -> list[str]:
        return sorted(path.name for path in self.path.glob(WORKER_SOCKET_GLOB))

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    # --- a worker's side ---------------------------------------------------------------
    def generation(self) -> int:
        """The scrape generation, or -1 when the directory has gone."""
        try:
            data = (self.path / SCRAPE).read_bytes()
        except OSError:
            return -1
        return _GENERATION.unpack_from(data)[0] if len(data) >= _GENERATION.size else -1

    def alive(self) -> bool:
        """Whether some process still holds the directory's lock (its root, or a process forked
        from the root)."""
        return held_elsewhere(self.path / TREE_LOCK)

    def new_worker_file(self, token: str) -> tuple[Path, int]:
        """A worker's own file, created empty and locked before it appears under its name."""
        staging = self.path / f".new-w-{token}.db"
        lock_fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        final = self.path / f"w-{token}.db"
        os.rename(staging, final)
        return final, lock_fd


def worker_token() -> str:
    """What names a worker's socket and file: unique among the processes of a machine."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def worker_socket_name(token: str) -> str:
    return f"w-{token}.s"


def remove_stale(base: Path) -> None:
    """Remove directories of servers that have gone, and half-made ones from crashes."""
    uid = os.getuid()
    for checked, path in enumerate(_candidates(base)):
        if checked >= MAX_STALE_CHECKS:
            break
        try:
            info = path.lstat()
        except OSError:
            continue
        if info.st_uid != uid or not path.is_dir() or path.is_symlink():
            continue
        if path.name.startswith(_NEW_PREFIX):
            if time.time() - info.st_mtime > NEW_DIR_GRACE_S:
                shutil.rmtree(path, ignore_errors=True)
            continue
        _remove_if_gone(Tree(path))


def _candidates(base: Path) -> Iterator[Path]:
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if entry.name.startswith((PREFIX, _NEW_PREFIX)):
                yield Path(entry.path)


def _remove_if_gone(tree: Tree) -> None:
    lock_fd = try_lock(tree.path / TREE_LOCK)
    if lock_fd is None:
        return
    try:
        if any(held_elsewhere(path) for path in tree.worker_files()):
            return
        _logger.debug("removing %s: the server that made it has gone", tree.path)
        tree.remove()
    finally:
        os.close(lock_fd)
