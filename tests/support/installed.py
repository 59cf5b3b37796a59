"""The packages laid out as the wheel installs them, for tools that read files, not imports.

The repository's folders ``bus/``, ``roles/``, ``sops/`` and ``scenarios/`` install under
``sopbus`` (``[tool.setuptools] package-dir`` in ``pyproject.toml``). Python finds them in
an editable install through setuptools' import hook, but import-linter, grimp and mypy walk
folders, and would see ``sopbus`` without its subpackages. They run on this copy instead.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from support.paths import ROOT


def package_dirs() -> dict[str, str]:
    """``pyproject.toml``'s package-dir: import name -> repository folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return mapping


def installed_tree(dest: Path) -> Path:
    """Copies the packages under ``dest`` as they install (``dest/sopbus/bus/...``) with the
    project's ``pyproject.toml`` beside them; returns ``dest``."""
    for package, folder in sorted(package_dirs().items()):  # a parent before its children
        shutil.copytree(
            ROOT / folder,
            dest.joinpath(*package.split(".")),
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest
