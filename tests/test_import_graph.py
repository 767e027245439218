"""The package's modules import one another in one direction: no import cycle anywhere in ``src/purebandits``.

A cycle makes a module's meaning depend on which side is imported first (one of them sees the other half
built) and hides which file holds a rule and which its fast path. The graph is read from the source: every
``import`` / ``from ... import`` at a module's top level (imports inside functions are deliberate late loads
and do not run at import time). ``from package import name`` counts as an import of ``package.name`` when
that is a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def top_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports at its top level (including under ``if`` / ``try`` there)."""
    out: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If | ast.Try):
            stack.extend(node.body + node.orelse + getattr(node, "finalbody", []) +
                         [h for handler in getattr(node, "handlers", []) for h in handler.body])
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in modules:
                out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def package_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in (SRC / "purebandits").rglob("*.py")}
    modules = set(files)
    return {m: top_level_imports(p, modules) - {m} for m, p in files.items()}


def test_no_import_cycle_in_the_package():
    graph = package_graph()
    assert len(graph) > 100 and "purebandits.algorithms.lucb" in graph  # the whole package was read
    assert cycles(graph) == []


def test_the_cycle_finder_finds_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []
