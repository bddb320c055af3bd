# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Label folding and patch bookkeeping, without any MCP SDK."""

from __future__ import annotations

import types

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.labels import LabelFolder, ServerLabels, clean_text
from opentelemetry.instrumentation.mcp_tokens.patches.wrapping import PatchSet


def test_label_folder_admits_up_to_its_bound() -> None:
    folder = LabelFolder(max_values=3)
    assert [folder.admit(name) for name in ("a", "b", "a", "c", "d")] == [True, True, False, True, False]
    assert [folder.fold(n) for n in ("a", "b", "c", "d", "never")] == ["a", "b", "c", "_OTHER", "_OTHER"]
    folder.admit("x" * 500)
    assert folder.fold("x" * 500) == semconv.OTHER_VALUE
    assert folder.fold(None) == "" and len(folder) == 3


def test_server_labels_are_bounded_and_separate_per_server() -> None:
    labels = ServerLabels(max_values=2, max_servers=2)
    assert labels.server("alpha") == "alpha" and labels.server("beta") == "beta"
    assert labels.server("gamma") == "_OTHER" and labels.server(None) == "unknown"
    labels.targets("alpha").admit("search")
    assert labels.targets("alpha").fold("search") == "search"
    assert labels.targets("beta").fold("search") == "_OTHER"


def test_clean_text_replaces_lone_surrogates_and_truncates() -> None:
    assert clean_text("ok\ud800!") == "ok?!"
    assert clean_text("é" * 2000, max_chars=10) == "é" * 10


def test_patch_set_restores_the_very_objects_it_replaced() -> None:
    class Target:
        def method(self, value: int) -> int:
            return value * 2

    module = types.ModuleType("fake_module")
    module.helper = len  # type: ignore[attr-defined]
    original_method = vars(Target)["method"]
    patches = PatchSet()
    patches.wrap(Target, "method", lambda wrapped, instance, args, kwargs: wrapped(*args, **kwargs) + 1)
    patches.replace(module, "helper", abs)
    assert Target().method(2) == 5 and module.helper is abs  # type: ignore[attr-defined]
    patches.restore()
    assert vars(Target)["method"] is original_method and module.helper is len  # type: ignore[attr-defined]
    assert len(patches) == 0
