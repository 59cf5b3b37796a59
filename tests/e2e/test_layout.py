"""The tree shows the architecture, and the import rules hold (docs/design/index.md, "The layers").

The layer rules are import-linter contracts in ``pyproject.toml``; this runs them, so an
import that runs back up a layer fails CI. A second check finds import circles between any
two modules (type-checking imports included), which layers alone do not forbid inside one
layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

from support.installed import ROOT, installed_tree, package_dirs

# The import graph of the installed layout, as (importer, imported) pairs; with
# include_external_packages, imports of outside packages appear by their top-level name.
GRAPH = """
import grimp, json, sys
graph = grimp.build_graph("sopbus", include_external_packages=True, cache_dir=None)
print(json.dumps(sorted([m, i] for m in graph.modules for i in graph.find_modules_directly_imported_by(m))))
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_tree(tmp_path_factory.mktemp("installed"))


def _env(tree: Path) -> dict[str, str]:
    # The copy comes first on the path, ahead of the editable install's import hook.
    return {**os.environ, "PYTHONPATH": str(tree)}


@pytest.fixture(scope="module")
def edges(tree: Path) -> list[tuple[str, str]]:
    done = subprocess.run(
        [sys.executable, "-c", GRAPH],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [(a, b) for a, b in json.loads(done.stdout)]


def test_import_linter_contracts_hold(tree: Path) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=tree,
        env=_env(tree),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_contracts_have_no_exceptions() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    assert contracts and all("ignore_imports" not in c for c in contracts)


def test_every_package_folder_is_installed() -> None:
    """``[tool.setuptools] packages`` lists every folder with an ``__init__.py``, under the
    name package-dir gives it: a package left out would be missing from the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    found = set()
    for package, folder in package_dirs().items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *rel)))
    assert found == listed


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
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
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


def test_no_import_circles_between_modules(edges: list[tuple[str, str]]) -> None:
    graph = grimp.ImportGraph()
    for importer, imported in edges:
        if imported.startswith("sopbus"):
            graph.add_import(importer=importer, imported=imported)
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_role_families_are_packages(root: Path) -> None:
    for family in ("company", "chat", "book", "gated"):
        assert (root / "roles" / family / "__init__.py").is_file()
    for part in ("llm", "money", "store", "scenario", "sandbox", "nats", "report", "otel"):
        assert (root / "bus" / part / "__init__.py").is_file()
    assert not (root / "bus" / "cli").exists()  # the command line sits on top, in sopbus/cli
    for part in ("cli", "sweep", "_assemble"):
        assert (root / "sopbus" / part / "__init__.py").is_file()
    flat = sorted(p.name for p in (root / "roles").glob("_*_*.py") if not p.name.startswith("__"))
    assert flat == [], f"prefix-named modules want a package: {flat}"


def test_only_the_link_talks_to_nats(edges: list[tuple[str, str]]) -> None:
    """One door to NATS (docs/design/style.md, one door to each outside system): ``bus/nats/_link.py`` is the only module
    that imports the client (its exceptions included); the rest sees the Link's trio API."""
    importers = {m for m, imported in edges if imported == "nats"}
    assert importers == {"sopbus.bus.nats._link"}
