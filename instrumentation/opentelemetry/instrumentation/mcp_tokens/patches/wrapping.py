# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Patches that `uninstrument()` can undo exactly.

Every patch goes through `PatchSet.wrap`, which records the attribute's original value
as found on the owner's own `__dict__` and puts back that very object on `restore()`
(tests check identity). Wrappers are `wrapt.FunctionWrapper`s, as in
opentelemetry-python-contrib, so signatures and introspection survive.
"""

from __future__ import annotations

import logging
import sys
import types
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


def wrap_everywhere(patches: PatchSet, owner: Any, name: str, wrapper: Wrapper) -> None:
    """Wrap `owner.name` and, for a module-level function, every loaded module holding it by name.

    A module that ran `from mcp.client.stdio import stdio_client` before `instrument()` (the
    SDK's own re-exports, fastmcp, the application) keeps the original in its globals; it is
    wrapped there too. Modules imported later pick up the wrapper from `owner`.
    """
    original = vars(owner).get(name) if isinstance(owner, types.ModuleType) else None
    patches.wrap(owner, name, wrapper)
    if original is None:
        return
    for module in _modules_holding(original, name):
        if module is not owner:
            try:
                patches.wrap(module, name, wrapper)
            except Exception:
                _logger.debug("mcp-tokens could not patch %s.%s", module.__name__, name, exc_info=True)


def _modules_holding(original: object, name: str) -> list[Any]:
    modules: dict[int, Any] = {}  # one module may be in sys.modules under two names
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and namespace.get(name) is original:
            modules[id(module)] = module
    return list(modules.values())
