# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Bounded metric label values, whatever a peer sends.

Tool and prompt names come from the peer (a client can call any name; a server can list
any name). A name becomes a label value once the server's own listing contains it, or a
call for it succeeded, and only while fewer than `max_values` names are known; anything
else folds into `_OTHER`. Server names (peer-chosen on the client side) are capped the
same way. Resource URIs never become labels.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from . import semconv

# Servers folded into `_OTHER` whose latest listings are remembered (see `SharedListings`).
MAX_SHARED_LISTINGS = 256
# Longer values are folded too: a 10 KB "tool name" is not a name.
MAX_VALUE_CHARS = 128
# The server label of exchanges whose server did not say its name.
UNKNOWN_SERVER = "unknown"


def clean_text(value: str, max_chars: int = 1024) -> str:
    """`value` cut to `max_chars` and made valid UTF-8 (lone surrogates would break exporters)."""
    value = value[:max_chars]
    return value if value.isascii() else value.encode("utf-8", "replace").decode("utf-8")


class LabelFolder:
    """A thread-safe, bounded set of admitted label values."""

    def __init__(self, max_values: int = 200) -> None:
        self._max_values = max_values
        self._admitted: set[str] = set()
        self._lock = threading.Lock()

    def admit(self, value: str) -> bool:
        """Mark `value` as legitimate (seen in a listing or in a successful call); whether
        this call admitted it (it was not admitted before, and there was room)."""
        if not value or len(value) > MAX_VALUE_CHARS or value in self._admitted:
            return False
        value = clean_text(value)
        with self._lock:
            if len(self._admitted) >= self._max_values or value in self._admitted:
                return False
            self._admitted.add(value)
            return True

    def fold(self, value: str | None) -> str:
        """The label value for `value`: itself if admitted, else `_OTHER` ("" for none)."""
        if not value:
            return ""
        return value if value in self._admitted else semconv.OTHER_VALUE

    def __len__(self) -> int:
        return len(self._admitted)


class ServerLabels:
    """Label folders for one process: server names, and tool/prompt names per server."""

    def __init__(self, max_values: int = 200, max_servers: int = 50) -> None:
        self._max_values = max_values
        self.servers = LabelFolder(max_servers)
        self._targets: dict[str, LabelFolder] = {}
        self._lock = threading.Lock()

    def targets(self, server: str) -> LabelFolder:
        """The tool/prompt folder of a (folded) server name."""
        folder = self._targets.get(server)
        if folder is None:
            with self._lock:
                folder = self._targets.setdefault(server, LabelFolder(self._max_values))
        return folder

    def server(self, name: str | None) -> str:
        """Admit a server name, and its label value."""
        if name:
            self.servers.admit(name)
        return self.fold_server(name)

    def fold_server(self, name: str | None) -> str:
        """The label value of a server name, without admitting it."""
        return self.servers.fold(name) or UNKNOWN_SERVER

    def replay(self, admitted: Iterable[tuple[str | None, str]]) -> None:
        """Admit what another `ServerLabels` admitted, in the same order (see
        `analyst.Findings.admitted`), so that both fold every name alike."""
        for server, value in admitted:
            if server is None:
                self.servers.admit(value)
            else:
                self.targets(server).admit(value)


class SharedListings:
    """The latest tool listing of each server whose name folds into one server label.

    Servers past the server cap all report as `_OTHER`; a listing of one of them must not
    replace the others' in that label's definition gauge. The gauge of the shared label is
    the sum, per tool label, of the latest listing of each such server (the
    `MAX_SHARED_LISTINGS` listed most recently per side), so its sum stays their tax.
    """

    def __init__(self, max_servers: int = MAX_SHARED_LISTINGS) -> None:
        self._max_servers = max_servers
        self._listings: OrderedDict[tuple[str, str], Mapping[str, int]] = OrderedDict()

    def combine(self, side: str, server: str, definitions: Mapping[str, int]) -> dict[str, int]:
        key = (side, server)
        self._listings[key] = definitions
        self._listings.move_to_end(key)
        while len(self._listings) > self._max_servers:
            self._listings.popitem(last=False)
        combined: dict[str, int] = {}
        for (listed_side, _), listing in self._listings.items():
            if listed_side == side:
                for label, tokens in listing.items():
                    combined[label] = combined.get(label, 0) + tokens
        return combined
