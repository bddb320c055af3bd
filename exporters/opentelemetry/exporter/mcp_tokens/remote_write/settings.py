# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Settings of the remote-write exporter, from `OTEL_EXPORTER_MCP_TOKENS_REMOTE_WRITE_*`.

A value that does not parse is logged once and its default is used; a missing endpoint turns
the exporter off (logged once): a typo must never stop the host process.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.exporter.mcp_tokens.env import integer_setting

_logger = logging.getLogger(__name__)

PREFIX = "OTEL_EXPORTER_MCP_TOKENS_REMOTE_WRITE_"
ENDPOINT = PREFIX + "ENDPOINT"
HEADERS = PREFIX + "HEADERS"
INTERVAL = PREFIX + "INTERVAL"
TIMEOUT = PREFIX + "TIMEOUT"

# Grafana's default scrape interval, which `$__rate_interval` assumes for a data source: a
# dashboard on pushed series needs at least one sample per 15 s, as on scraped ones.
DEFAULT_INTERVAL_MS = 15_000
DEFAULT_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class RemoteWriteSettings:
    endpoint: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    interval_s: float = DEFAULT_INTERVAL_MS / 1000
    timeout_s: float = DEFAULT_TIMEOUT_MS / 1000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RemoteWriteSettings:
        env = os.environ if environ is None else environ
        return cls(
            endpoint=_endpoint(env.get(ENDPOINT, "").strip()),
            headers=_headers(env.get(HEADERS, "")),
            interval_s=integer_setting(env, INTERVAL, DEFAULT_INTERVAL_MS, 100, 3_600_000) / 1000,
            timeout_s=integer_setting(env, TIMEOUT, DEFAULT_TIMEOUT_MS, 100, 600_000) / 1000,
        )


def _endpoint(text: str) -> str:
    if not text:
        return ""
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        _logger.warning("%s=%r is not an http(s) URL; nothing is pushed", ENDPOINT, text)
        return ""
    return text


def _headers(text: str) -> dict[str, str]:
    """`name=value` pairs separated by commas, values URL-encoded (the format of
    OTEL_EXPORTER_OTLP_HEADERS)."""
    headers: dict[str, str] = {}
    for pair in (part.strip() for part in text.split(",")):
        if not pair:
            continue
        name, sep, value = pair.partition("=")
        name = urllib.parse.unquote(name).strip()
        if not sep or not name or any(c in name for c in "\r\n:"):
            _logger.warning("%s: %r is not name=value; it is ignored", HEADERS, pair.split("=")[0])
            continue
        value = urllib.parse.unquote(value).strip()
        if "\r" in value or "\n" in value:
            _logger.warning("%s: the value of %r has a line break; it is ignored", HEADERS, name)
            continue
        headers[name] = value
    return headers
