# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What a typed mcp 1.x request tells telemetry, and its copy with a new `_meta`.

Everything here is cheap on the caller's path: the tools/call arguments are referenced,
not copied or serialised (they are the dict that goes on the wire); only the small
sampling/createMessage params are dumped to their wire form here.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

_TARGET_METHODS = frozenset({"tools/call", "prompts/get"})
_RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
_params_classes: dict[type, type[BaseModel] | None] = {}


def request_root(request: object) -> Any:
    """The request model inside a ClientRequest/ServerRequest wrapper (fastmcp 3 passes bare ones)."""
    return getattr(request, "root", request)


def target_of(method: str, params: object) -> str | None:
    """The tool or prompt a request names."""
    if method not in _TARGET_METHODS:
        return None
    name = getattr(params, "name", None)
    return name if isinstance(name, str) else None


def resource_uri_of(method: str, params: object) -> str | None:
    if method not in _RESOURCE_METHODS:
        return None
    uri = getattr(params, "uri", None)
    return str(uri) if uri is not None else None


def counted_request(method: str, params: object) -> object:
    """The wire form of the request payload the pipeline counts, for the methods it counts."""
    if params is None:
        return None
    if method == "tools/call":
        arguments = getattr(params, "arguments", None)
        return {
            "name": getattr(params, "name", None),
            "arguments": arguments if arguments is not None else {},
        }
    if method == "sampling/createMessage" and isinstance(params, BaseModel):
        return params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return None


def meta_of(params: object) -> dict[str, Any]:
    """A request's `_meta` as a dict (declared fields and extras, e.g. progressToken, traceparent)."""
    meta = getattr(params, "meta", None)
    if meta is None:
        return {}
    if isinstance(meta, BaseModel):
        return meta.model_dump(by_alias=True, exclude_none=True)
    return dict(meta) if isinstance(meta, Mapping) else {}


def meta_extras_of(meta: object) -> Mapping[str, Any]:
    """The extra (undeclared) `_meta` entries of a received request: where propagation keys live."""
    if meta is None:
        return {}
    if isinstance(meta, Mapping):
        return meta
    extras = getattr(meta, "model_extra", None)
    return extras if isinstance(extras, Mapping) else {}


def with_meta(request: Any, meta: dict[str, Any], meta_class: type[BaseModel]) -> Any:
    """A copy of `request` whose params carry `meta` as `_meta` (params created if absent).

    Shallow copies: the arguments and other params are shared with the caller's request,
    which is left untouched.
    """
    root = request_root(request)
    params = getattr(root, "params", None)
    if isinstance(params, BaseModel):
        existing = getattr(params, "meta", None)
        new_meta_class = type(existing) if isinstance(existing, BaseModel) else meta_class
        new_params = params.model_copy(update={"meta": new_meta_class.model_validate(meta)})
    elif params is None:
        params_class = _params_class(type(root))
        if params_class is None:
            return request
        new_params = params_class.model_validate({"_meta": meta})
    else:
        return request
    new_root = root.model_copy(update={"params": new_params})
    if root is request:
        return new_root
    return request.model_copy(update={"root": new_root})


def _params_class(request_class: type) -> type[BaseModel] | None:
    """The params model a request class declares (`PaginatedRequestParams | None` -> the class)."""
    if request_class not in _params_classes:
        found: type[BaseModel] | None = None
        fields = getattr(request_class, "model_fields", {})
        field = fields.get("params")
        annotation = getattr(field, "annotation", None)
        for candidate in typing.get_args(annotation) or (annotation,):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                found = candidate
                break
        _params_classes[request_class] = found
    return _params_classes[request_class]
