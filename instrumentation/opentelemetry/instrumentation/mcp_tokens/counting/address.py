# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Where a user's counting service lives, and the checks that keep it that user's alone.

One service per user and tokenizer: its files sit in a directory only the user can open
(mode 0700, owned by the user; anything else is refused, never repaired), named after the
tokenizer and a digest of what must agree between a client and its service (the protocol
and this package's version, the tokenizer's spec):

    $XDG_RUNTIME_DIR/mcp-tokens/      (else <tmp>/mcp-tokens-<uid>/, or COUNTER_DIR)
        <name>-<digest>.lock   held (flock) by the live service: two never run
        <name>-<digest>.sock   the counting socket
        <name>-<digest>.guard  the guard's socket
        <name>-<digest>.log    the service's own warnings

Both ends check the other's uid with SO_PEERCRED, so a socket someone else managed to
put there, or a client of another user, is refused. Platforms without Unix sockets or
peer credentials have no service (the analysis runs on a thread instead).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import socket
import stat
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.version import __version__

# Bumped whenever the frames (protocol.py) change meaning: old and new never meet.
PROTOCOL = 2
_UCRED = struct.Struct("3i")  # pid, uid, gid
# sockaddr_un's path is 108 bytes on Linux (104 elsewhere), its final NUL included.
_MAX_SOCKET_PATH = 103


class ServiceUnavailable(Exception):
    """No counting service can run or be reached here (the reason is the message)."""


def supported() -> bool:
    """Whether this platform has what the service needs: Unix sockets and peer credentials."""
    return hasattr(socket, "AF_UNIX") and hasattr(socket, "SO_PEERCRED") and hasattr(os, "fork")


@dataclass(frozen=True)
class Address:
    directory: Path
    name: str

    @property
    def socket(self) -> Path:
        return self.directory / f"{self.name}.sock"

    @property
    def guard_socket(self) -> Path:
        return self.directory / f"{self.name}.guard"

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.name}.lock"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"


def address_of(spec: TokenizerSpec, directory: str | None = None) -> Address:
    """The service for `spec`, in `directory` (default: the user's runtime directory)."""
    return Address(Path(directory) if directory else default_directory(), service_name(spec))


def default_directory() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime) and _owned_private(runtime):
        return Path(runtime) / "mcp-tokens"
    return Path(tempfile.gettempdir()) / f"mcp-tokens-{os.getuid()}"


def service_name(spec: TokenizerSpec) -> str:
    path = os.path.abspath(spec.path) if spec.path else None
    tokenizer = [spec.encoding, path, _file_identity(path), spec.pattern]
    identity = json.dumps([PROTOCOL, __version__, _code_identity(), *tokenizer])
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.encoding)[:32] or "tokenizer"
    return f"{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


@functools.lru_cache(maxsize=1)
def _code_identity() -> str:
    """A digest of this package's modules' names and sizes: two installs of one release share
    a service, while a client never meets a service running other code of the same version
    (a development checkout). Sizes, not times: copies of one release may differ in those."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for module in sorted(package.rglob("*.py")):
        with contextlib.suppress(OSError):
            digest.update(f"{module.relative_to(package)}:{module.stat().st_size};".encode())
    return digest.hexdigest()[:16]


def _file_identity(path: str | None) -> list[int] | None:
    # A tokenizer file edited in place is another tokenizer: another service.
    try:
        info = os.stat(path) if path else None
    except OSError:
        return None
    return None if info is None else [info.st_size, info.st_mtime_ns]


def ensure_directory(address: Address) -> None:
    """Create the directory (0700) if needed; raise ServiceUnavailable unless it is a
    directory of this user's that no one else can open."""
    directory = address.directory
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(directory)
    except OSError as exc:
        raise ServiceUnavailable(f"cannot create {directory}: {exc}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServiceUnavailable(f"{directory} is not a directory only this user can open")
    if len(os.fsencode(address.guard_socket)) > _MAX_SOCKET_PATH:
        raise ServiceUnavailable(f"{directory} is too long a path for a Unix socket")


def _owned_private(path: str) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o077


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    _, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return int(uid)


def is_own_user(sock: socket.socket) -> bool:
    try:
        return peer_uid(sock) == os.getuid()
    except OSError:
        return False
