"""The worker queue, label folding and patch bookkeeping, without any MCP SDK."""

from __future__ import annotations

import threading
import time
import types

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.labels import LabelFolder, ServerLabels, clean_text
from opentelemetry.instrumentation.mcp_tokens.patches.wrapping import PatchSet
from opentelemetry.instrumentation.mcp_tokens.worker import AnalysisWorker


def exchange(text: str = "x") -> Exchange:
    return Exchange(Side.SERVER, "tools/call", response={"content": [{"type": "text", "text": text}]})


def test_worker_processes_in_order_and_drains() -> None:
    seen: list[str] = []
    worker = AnalysisWorker(lambda e: seen.append(e.method), lambda e: None)
    worker.start()
    for method in ("a", "b", "c"):
        worker.submit(Exchange(Side.CLIENT, method))
    assert worker.drain(5)
    assert seen == ["a", "b", "c"]
    worker.stop()


def test_a_full_queue_overflows_instead_of_blocking() -> None:
    release = threading.Event()
    processed: list[Exchange] = []
    overflowed: list[Exchange] = []

    def slow(item: Exchange) -> None:
        release.wait(5)
        processed.append(item)

    worker = AnalysisWorker(slow, overflowed.append, max_pending=2)
    worker.start()
    worker.submit(exchange())
    deadline = time.monotonic() + 5
    while worker.pending and time.monotonic() < deadline:  # wait until the worker holds it
        time.sleep(0.001)
    start = time.perf_counter()
    for item in [exchange() for _ in range(5)]:
        worker.submit(item)
    assert time.perf_counter() - start < 0.05, "submit never waits"
    # One is being processed, two wait, the rest overflow.
    assert len(overflowed) == 3
    release.set()
    assert worker.drain(5)
    assert len(processed) == 3
    worker.stop()


def test_the_queue_is_bounded_by_the_characters_it_holds() -> None:
    release = threading.Event()
    overflowed: list[Exchange] = []
    worker = AnalysisWorker(lambda e: release.wait(5), overflowed.append, max_pending_chars=1000)
    worker.start()
    worker.submit(exchange("y" * 10))  # taken by the worker thread
    deadline = time.monotonic() + 5
    while worker.pending and time.monotonic() < deadline:
        time.sleep(0.001)
    worker.submit(exchange("y" * 900))
    worker.submit(exchange("y" * 900))  # would hold 1800 characters
    assert len(overflowed) == 1
    release.set()
    worker.stop()


def test_a_failing_process_does_not_stop_the_worker() -> None:
    seen: list[str] = []

    def process(item: Exchange) -> None:
        if item.method == "bad":
            raise RuntimeError("ours")
        seen.append(item.method)

    worker = AnalysisWorker(process, lambda e: None)
    worker.start()
    worker.submit(Exchange(Side.CLIENT, "bad"))
    worker.submit(Exchange(Side.CLIENT, "good"))
    assert worker.drain(5) and seen == ["good"]
    worker.stop()


def test_stop_hands_leftovers_to_overflow() -> None:
    release = threading.Event()
    overflowed: list[Exchange] = []
    worker = AnalysisWorker(lambda e: release.wait(0.5), overflowed.append)
    worker.start()
    for _ in range(3):
        worker.submit(exchange())
    worker.stop(timeout=0.1)
    release.set()
    assert len(overflowed) >= 1
    worker.submit(exchange())  # after stop: overflow, never an exception
    assert len(overflowed) >= 2


def test_label_folder_admits_up_to_its_bound() -> None:
    folder = LabelFolder(max_values=3)
    for name in ("a", "b", "c", "d"):
        folder.admit(name)
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
