"""MkDocs hook: the packages laid out as they install, for mkdocstrings to read.

The repository's folders ``bus/``, ``roles/``, ``sops/`` and ``scenarios/`` install as
``sopbus.bus``, ``sopbus.roles``, ``sopbus.sops`` and ``sopbus.scenarios`` (the
``package-dir`` table of ``pyproject.toml``). Python finds them through setuptools' import
hook, but griffe, which reads folders, sees ``sopbus`` without them. So before the build
this hook makes the installed layout in a temporary folder, out of symbolic links to the
checkout (a copy where links cannot be made), and gives that folder to the Python handler
as its search path. Nothing is written into the checkout.
"""

from __future__ import annotations

import shutil
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
_made: list[tempfile.TemporaryDirectory[str]] = []


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """``[tool.setuptools] package-dir``: import name -> folder in the checkout."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in mapping.items()}


def installed_layout(dest: Path, mapping: dict[str, Path]) -> Path:
    """Lays the packages out under ``dest`` as they install (``dest/sopbus/bus/...``)."""
    parents = {name.rpartition(".")[0] for name in mapping}
    for name in sorted(mapping):  # a parent before its children
        target = dest.joinpath(*name.split("."))
        if name in parents:  # holds mapped children: a real folder, its own entries linked
            target.mkdir(parents=True, exist_ok=True)
            for entry in mapping[name].iterdir():
                if entry.name != "__pycache__" and f"{name}.{entry.name}" not in mapping:
                    _link(target / entry.name, entry)
        else:
            _link(target, mapping[name])
    return dest


def _link(link: Path, to: Path) -> None:
    try:
        link.symlink_to(to, target_is_directory=to.is_dir())
    except OSError:  # no symbolic links here (Windows without the privilege): copy
        if to.is_dir():
            shutil.copytree(to, link, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(to, link)


@event_priority(100)  # before mkdocstrings' own on_config, which makes the handler
def on_config(config: Any) -> Any:
    folder = tempfile.TemporaryDirectory(prefix="sopbus-docs-")
    _made.append(folder)
    layout = installed_layout(Path(folder.name), package_dirs())
    python = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    python["paths"] = [str(layout)]
    return config


def on_shutdown() -> None:
    while _made:
        _made.pop().cleanup()
