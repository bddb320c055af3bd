"""Patches that `uninstrument()` can undo exactly.

Every patch goes through `PatchSet.wrap`, which records the attribute's original value
as found on the owner's own `__dict__` and puts back that very object on `restore()`
(tests check identity). Wrappers are `wrapt.FunctionWrapper`s, as in
opentelemetry-python-contrib, so signatures and introspection survive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import wrapt

_logger = logging.getLogger(__name__)

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]
_MISSING = object()


class PatchSet:
    def __init__(self) -> None:
        self._originals: list[tuple[object, str, object]] = []

    def wrap(self, owner: object, name: str, wrapper: Wrapper) -> None:
        """Wrap `owner.name` (a class or module attribute) with `wrapper(wrapped, instance, args, kwargs)`."""
        original = vars(owner).get(name, _MISSING) if hasattr(owner, "__dict__") else _MISSING
        if original is _MISSING:
            raise AttributeError(f"{getattr(owner, '__name__', owner)!r} has no attribute {name!r} to patch")
        self._originals.append((owner, name, original))
        wrapt.wrap_function_wrapper(owner, name, wrapper)

    def replace(self, owner: object, name: str, value: object) -> None:
        """Replace a module global (looked up at call time) with `value`."""
        original = vars(owner).get(name, _MISSING)
        if original is _MISSING:
            raise AttributeError(
                f"{getattr(owner, '__name__', owner)!r} has no attribute {name!r} to replace"
            )
        self._originals.append((owner, name, original))
        setattr(owner, name, value)

    def restore(self) -> None:
        """Put every original back, newest patch first."""
        while self._originals:
            owner, name, original = self._originals.pop()
            try:
                setattr(owner, name, original)
            except Exception:
                _logger.warning("mcp-tokens could not restore %s.%s", owner, name, exc_info=True)

    def __len__(self) -> int:
        return len(self._originals)
