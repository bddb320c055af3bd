# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""No import cycles in instrumentation/ and exporters/.

Every import statement counts: at module level, inside a function, under `if TYPE_CHECKING:`.
A function-level import only postpones a cycle to the first call, and a typing-only one is a
cycle between two modules' designs; both are broken where they are found, by moving what
both sides need into a module they both import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_ROOTS = (REPO_ROOT / "instrumentation", REPO_ROOT / "exporters")

Graph = dict[str, set[str]]


def module_files(roots: Iterable[Path]) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (its file, whether it is a package's `__init__`)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            found[name] = (path, is_package)
    return found


def import_graph(roots: Iterable[Path]) -> Graph:
    """Module -> the modules of these trees it imports (the most specific one each import names)."""
    modules = module_files(roots)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(package, node.level, node.module)
                # `from package import module` imports the module; `from module import name`
                # the module that defines the name.
                targets.update(
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base)
                    for alias in node.names
                )
        graph[name] = {target for target in targets if target is not None and target != name}
    return graph


def _absolute(package: str, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base)


def cycles(graph: Graph) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a loop (Tarjan's
    strongly connected components, iteratively), each sorted; sorted."""
    index: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = lowest[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            target = next(edges, None)
            if target is not None:
                if target not in index:
                    index[target] = lowest[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    lowest[node] = min(lowest[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                lowest[parent] = min(lowest[parent], lowest[node])
            if lowest[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def test_instrumentation_and_exporters_have_no_import_cycles() -> None:
    graph = import_graph(SOURCE_ROOTS)
    assert "opentelemetry.instrumentation.mcp_tokens.patches.mcp_v1" in graph
    assert "opentelemetry.exporter.mcp_tokens.report.model" in graph
    assert cycles(graph) == []


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "second",
    [
        "from .first import VALUE\n",  # at module level, relative
        "def later():\n    from pkg.first import VALUE\n    return VALUE\n",  # inside a function
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import first\n",  # for typing
        "import pkg.sub.third\n",  # around a loop: first -> second -> third -> first
    ],
    ids=["module-level", "function-level", "type-checking", "three-modules"],
)
def test_every_kind_of_import_closes_a_cycle(tmp_path: Path, second: str) -> None:
    _write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/first.py": "from . import second\nVALUE = 1\n",
            "pkg/second.py": second,
            "pkg/sub/__init__.py": "",
            "pkg/sub/third.py": "from ..first import VALUE\n",
            "pkg/apart.py": "from pkg import first, second\nimport json\n",
        },
    )
    expected = ["pkg.first", "pkg.second"]
    if "third" in second:
        expected.append("pkg.sub.third")
    assert cycles(import_graph([tmp_path])) == [expected]


def test_modules_that_only_share_an_import_are_no_cycle(tmp_path: Path) -> None:
    _write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .shared import helper\n",
            "pkg/shared.py": "import os\n\ndef helper():\n    return os.sep\n",
            "pkg/left.py": "from .shared import helper\n",
            "pkg/right.py": "from pkg.shared import helper\nfrom pkg import left\n",
        },
    )
    assert import_graph([tmp_path])["pkg.right"] == {"pkg.shared", "pkg.left"}
    assert cycles(import_graph([tmp_path])) == []
