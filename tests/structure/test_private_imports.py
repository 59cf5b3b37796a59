"""No module reaches into another package's private module (docs/design/index.md, "Layout").

A module ``P._x`` (or ``P._x.y``) is private to the package ``P``: the modules of ``P`` and
of its subpackages may import it, nobody else. What another package needs is on ``P``'s
face (its ``__init__.py``) or is a decision to put it there. The walk reads every import of
the packages as they install (``[tool.setuptools] package-dir``: ``sopbus/``, ``bus/``,
``roles/``, ``sops/``), those inside functions and under ``TYPE_CHECKING`` included, and a
lazy face's ``_WHERE`` table, which imports by name. The shipped scenarios' modules are
user code and are not walked. There is no allow-list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

from support.installed import package_dirs
from support.paths import ROOT

WALKED = ("sopbus", "sopbus.bus", "sopbus.roles", "sopbus.sops")
NOT_CODE = {"tests", "data", "_templates", "__pycache__"}


def modules(root: Path, dirs: Mapping[str, str]) -> dict[str, Path]:
    """Dotted name -> file, for every module of the mapped folders (the most specific
    mapping wins: ``bus/`` is ``sopbus.bus``, not ``sopbus`` with a ``bus`` folder)."""
    found: dict[str, Path] = {}
    for package, folder in sorted(dirs.items(), key=lambda kv: len(kv[0])):
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if NOT_CODE & set(parts):
                continue
            inner = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *inner))] = path
    return found


def private_owner(target: str, known: Mapping[str, Path]) -> str | None:
    """The package whose private module ``target`` is in (``sopbus.bus.money._ledger`` ->
    ``sopbus.bus.money``), or None for a public path."""
    parts = target.split(".")
    for i, segment in enumerate(parts[1:], start=1):
        if segment.startswith("_") and not segment.startswith("__"):
            if ".".join(parts[: i + 1]) in known:
                return ".".join(parts[:i])
    return None


def resolve(package: str, level: int, module: str | None) -> str:
    """The absolute name of ``from <level dots><module> import`` written in ``package``."""
    if not level:
        return module or ""
    base = package.split(".")[: len(package.split(".")) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def imported(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of each import in a module, the module objects that a
    ``from package import _module`` brings included."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            source = resolve(package, node.level, node.module)
            yield node.lineno, source
            for alias in node.names:
                if f"{source}.{alias.name}" in known:
                    yield node.lineno, f"{source}.{alias.name}"
        elif _is_where(node) and path.name == "__init__.py":
            assert isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict)
            for value in node.value.values:
                spec = ast.literal_eval(value)
                dots = len(spec) - len(spec.lstrip("."))
                yield node.lineno, resolve(package, dots, spec[dots:] or None)


def _is_where(node: ast.AST) -> bool:
    """``_WHERE = {...}``: a lazy face's table of name -> module it imports from."""
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, ast.AnnAssign)
        else []
    )
    value = getattr(node, "value", None)
    return isinstance(value, ast.Dict) and any(
        isinstance(t, ast.Name) and t.id == "_WHERE" for t in targets
    )


def reach_ins(root: Path, dirs: Mapping[str, str], walked: tuple[str, ...]) -> list[str]:
    known = modules(root, dirs)
    found = []
    for name, path in sorted(known.items()):
        if not any(name == w or name.startswith(w + ".") for w in walked):
            continue
        if name == "sopbus.scenarios" or name.startswith("sopbus.scenarios."):
            continue  # user code, shipped as examples
        for line, target in sorted(imported(name, path, known)):
            owner = private_owner(target, known)
            if owner and not (name == owner or name.startswith(owner + ".")):
                where = path.relative_to(root)
                found.append(f"{where}:{line}: {name} imports {target}, private to {owner}")
    return found


def test_no_module_imports_another_packages_private_module() -> None:
    found = reach_ins(ROOT, package_dirs(), WALKED)
    assert found == [], "import these from the package's face instead:\n" + "\n".join(found)


def test_the_walk_finds_a_reach_in_and_allows_the_family(tmp_path: Path) -> None:
    """The walk can fail: in a small tree it reports exactly the import that reaches in."""
    files = {
        "top/__init__.py": "",
        "top/_helper.py": "X = 1\n",
        "top/eng/__init__.py": "from ._core import Core as Core\n",
        "top/eng/_core.py": "from .._helper import X\nclass Core: ...\n",
        "top/eng/sub/__init__.py": "",
        "top/eng/sub/_deep.py": "from .._core import Core\n",
        "top/app/__init__.py": "",
        "top/app/_main.py": (
            "from ..eng import Core\ndef f():\n    from ..eng._core import Core\n"
            "from top.eng import _core\n"
        ),
        "top/app/_lazy_face.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    (tmp_path / "top/app/__init__.py").write_text(
        '_WHERE: dict[str, str] = {"Core": "..eng._core", "f": "._main"}\n', encoding="utf-8"
    )
    found = reach_ins(tmp_path, {"top": "top"}, ("top",))
    assert found == [
        "top/app/__init__.py:1: top.app imports top.eng._core, private to top.eng",
        "top/app/_main.py:3: top.app._main imports top.eng._core, private to top.eng",
        "top/app/_main.py:4: top.app._main imports top.eng._core, private to top.eng",
    ]
