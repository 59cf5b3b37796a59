"""``sopbus.sops.<name>`` for a built-in SOP, the path it had before the built-in SOPs
moved into ``sopbus.sops.builtin``: ``from sopbus.sops.group_chat import SOP`` in a user's
module, or ``sop = "sopbus.sops.group_chat:SOP"`` in a scenario, keep working.

The old name is the same module object as the new one, not a second import of its file: a
second copy would define its role classes twice and hold a second ``SOP`` value.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from ._sop import BUILTIN_PACKAGE, builtin_sops

OLD_PACKAGE = "sopbus.sops"


class _OldPath(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``sopbus.sops.<name>`` for a built-in ``<name>`` and loads it as the module
    ``sopbus.sops.builtin.<name>``. Last on ``sys.meta_path``, so it is asked only for a
    name no other finder knows."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != OLD_PACKAGE or name not in builtin_sops():
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(f"{BUILTIN_PACKAGE}.{spec.name.rpartition('.')[2]}")
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has set the module's __spec__ to the old name's; the module is
        # already run, so only its own spec is given back.
        module.__spec__ = self._specs.pop(module.__name__, module.__spec__)


def install() -> None:
    """Puts the finder last on ``sys.meta_path`` (once, however often this is called)."""
    if not any(isinstance(finder, _OldPath) for finder in sys.meta_path):
        sys.meta_path.append(_OldPath())
