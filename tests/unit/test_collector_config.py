# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""examples/otel-collector.yaml: an OTLP receiver, memory limiter and batch, the
prometheusremotewrite exporter, wired into one metrics pipeline. Where a Collector binary is
installed its own `validate` runs too; none can be installed from this machine's registries,
so the structure is checked here (tests/e2e/test_otlp_e2e.py checks the names it produces)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "otel-collector.yaml"
_ENV_REFERENCE = re.compile(r"\$\{([^}]*)\}")


def config() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    return loaded


def test_one_metrics_pipeline_from_otlp_to_remote_write() -> None:
    loaded = config()
    pipeline = loaded["service"]["pipelines"]["metrics"]
    assert pipeline == {
        "receivers": ["otlp"],
        "processors": ["memory_limiter", "batch"],  # the limiter first, as the Collector advises
        "exporters": ["prometheusremotewrite"],
    }
    for kind in ("receivers", "processors", "exporters"):
        assert set(pipeline[kind]) <= set(loaded[kind]), kind
    assert set(loaded["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    exporter = loaded["exporters"]["prometheusremotewrite"]
    assert exporter["endpoint"] == "${env:REMOTE_WRITE_ENDPOINT}"
    # The names the dashboards read: suffixes on, resource attributes on target_info only.
    assert exporter["add_metric_suffixes"] is True
    assert exporter["resource_to_telemetry_conversion"] == {"enabled": False}
    assert exporter["target_info"] == {"enabled": True}


def test_every_setting_from_the_environment_uses_the_collectors_syntax() -> None:
    references = _ENV_REFERENCE.findall(CONFIG.read_text(encoding="utf-8"))
    assert references
    for reference in references:
        assert re.fullmatch(r"env:[A-Z_][A-Z0-9_]*(:-[^}]*)?", reference), reference


@pytest.mark.skipif(
    not (shutil.which("otelcol-contrib") or shutil.which("otelcol")), reason="no Collector installed"
)
def test_the_collector_accepts_the_config() -> None:
    binary = shutil.which("otelcol-contrib") or shutil.which("otelcol")
    assert binary is not None
    result = subprocess.run(
        [binary, "validate", f"--config={CONFIG}"],
        env={"REMOTE_WRITE_ENDPOINT": "https://receiver.invalid/api/v1/push", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
