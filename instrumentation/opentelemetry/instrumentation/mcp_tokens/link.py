"""What the worker needs from the analysis: a link to a helper process or to a thread.

The worker (worker.py) sends each exchange in steps, reads what came back and waits for it
the same way whichever link it has: `helper_link.ProcessLink` (a helper process) or
`thread_link.ThreadLink` (the analysis on the worker's own thread, where no helper can run).
This module is light: the links themselves import the analysis, on the worker's thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .analyst import AnalystStatus, Findings
    from .exchange import Exchange


class LinkClosed(Exception):
    """The analysis is gone (the helper exited, or its pipes broke)."""


class Link(Protocol):
    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[bool]:
        """Sends one exchange's job (`seq`; `behind`: estimate, the queue is filling), a step
        per `next()`: True after a step, False when the link cannot take more right now
        (try again later). What a step leaves pending goes with the next `flush()`. Raises
        LinkClosed."""
        ...

    def flush(self) -> bool:
        """Send what is pending; whether all of it went. Raises LinkClosed."""
        ...

    def receive(self) -> list[Findings]:
        """What arrived since the last call; never blocks. Raises LinkClosed at the end."""
        ...

    def wait(self, timeout: float) -> None:
        """Block (without the GIL) until something may have arrived, or `timeout`."""
        ...

    @property
    def status(self) -> AnalystStatus | None:
        """The analysis' status once its tokenizer is loaded (findings come after it)."""
        ...

    def close(self, timeout: float = 2.0) -> None: ...

    def forget(self) -> None:
        """In a forked child: let go of the link without touching what the parent uses."""
        ...
