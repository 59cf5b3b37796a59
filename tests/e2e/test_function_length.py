"""Functions stay short (shared/STYLE.md, principle 11; issue 36): none of the package's
functions is over 60 lines unless a comment on the line above its ``def`` (or its first
decorator) says why, its first line starting ``# long:``. A function that grows past the bound fails here
with its place and length, so the choice to keep it long is written down, not drifted into.
"""

from __future__ import annotations

import ast
from pathlib import Path

from support.installed import package_dirs
from support.paths import ROOT

LIMIT = 60


def _reason_above(lines: list[str], first: int) -> bool:
    """Whether the comment block just above line ``first`` (1-based) starts ``# long:``."""
    i = first - 2
    while i >= 0 and lines[i].strip().startswith("#"):
        if lines[i].strip().startswith("# long:"):
            return True
        i -= 1
    return False


def _long_functions(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        if length > LIMIT and not _reason_above(lines, first):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_over_60_lines_without_a_reason() -> None:
    folders = sorted({ROOT / folder for folder in package_dirs().values()})
    files = sorted(f for folder in folders for f in folder.rglob("*.py"))
    assert files, "no package files found: the package-dir mapping in pyproject.toml moved?"
    offenders = [place for f in files for place in _long_functions(f)]
    assert not offenders, (
        f"functions over {LIMIT} lines (split them, or say why above the def with "
        f"'# long: ...'):\n" + "\n".join(offenders)
    )
