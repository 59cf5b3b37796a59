"""The tree shows the architecture, and the import rules hold (DESIGN.md, "Layout").

The layer rules are import-linter contracts in ``pyproject.toml``; this runs them, so an
import that runs back up a layer fails CI. A second check finds import circles between any
two modules (type-checking imports included), which layers alone do not forbid inside one
layer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sopbus", "bus", "roles", "sops")


def test_import_linter_contracts_hold() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _graph() -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    return graph


def test_no_import_circles_between_modules() -> None:
    graph = _graph()
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_role_families_are_packages() -> None:
    for family in ("company", "chat", "book", "gated"):
        assert (ROOT / "roles" / family / "__init__.py").is_file()
    for part in ("llm", "money", "store", "scenario", "sandbox", "cli"):
        assert (ROOT / "bus" / part / "__init__.py").is_file()
    flat = sorted(p.name for p in (ROOT / "roles").glob("_*_*.py") if not p.name.startswith("__"))
    assert flat == [], f"prefix-named modules want a package: {flat}"


def test_only_the_link_talks_to_nats() -> None:
    """One door to NATS (STYLE.md, principle 15): ``bus/nats/_link.py`` is the only module
    that imports the client (its exceptions included); the rest sees the Link's trio API."""
    graph = grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
    importers = {m for m in graph.find_modules_that_directly_import("nats")}
    assert importers == {"bus.nats._link"}
