"""Lazy re-exports for a package's ``__init__``: a name is imported from its private module
the first time someone asks for it.

``sopbus --help`` must answer in well under a second, and a package ``__init__`` that
imported all its modules would load trio, openai, pydantic and the BPE tables first.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for the package whose globals are
    ``namespace``; ``where`` maps each public name to its module, relative to the package."""
    package = namespace["__name__"]
    public = sorted(where)

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def dir_() -> list[str]:
        return public

    return getattr_, dir_, public
