"""Importing a user's module (an SOP's, a provider's) so that whatever it does at import time (exits, raises,
hangs) becomes a :class:`~sopbus.bus.ConfigError` that names the file and what it did.

The import runs in a daemon thread bounded by :func:`import_timeout_s`: ``signal.alarm``
only works on the main thread and cannot interrupt a C call, and a thread can be left
behind when the module never finishes (a daemon thread does not keep the process alive).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from sopbus.bus import ConfigError

IMPORT_TIMEOUT_S = 10.0
"""How long a SOP module may take to import by default: a module that needs more is doing
work (or waiting on something) at import time that belongs in its ``build``. A module that
imports a heavy library may need more: ``SOPBUS_IMPORT_TIMEOUT_S`` sets the bound."""
TIMEOUT_ENV = "SOPBUS_IMPORT_TIMEOUT_S"


def import_timeout_s() -> float:
    """The import bound: ``SOPBUS_IMPORT_TIMEOUT_S`` when set, else :data:`IMPORT_TIMEOUT_S`."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return IMPORT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise ConfigError(
            f"{TIMEOUT_ENV}={text!r}: expected seconds above 0 and at most 3600, e.g. 30"
        )
    return value


_HERE = Path(__file__).resolve().parent


def import_sop_module(
    module_name: str, directory: Path | None, where: str, file: str, *, kind: str = "SOP"
) -> Any:
    """``module_name`` imported (looking first in ``directory``), or a ConfigError that
    starts with ``file`` (``"<scenario>: "`` or ``""``) and names ``where`` it was named.
    ``kind`` says what the module holds in the messages (``"SOP"``, ``"provider"``)."""
    outcome: dict[str, Any] = {}
    worker = threading.Thread(
        target=_import_into,
        args=(module_name, directory, outcome),
        name=f"import {module_name}",
        daemon=True,
    )
    bound = import_timeout_s()
    worker.start()
    worker.join(bound)
    if worker.is_alive():
        raise ConfigError(
            f"{file}{_shown(module_name, directory)} (the {kind} module named at {where}) did not "
            f"finish importing within {bound:g} s; move slow or blocking work out of the "
            f"module's top level into its build(), or give it longer with {TIMEOUT_ENV}"
        )
    if "module" in outcome:
        return outcome["module"]
    return _raise_for(outcome["error"], module_name, where, file, kind)


def _import_into(module_name: str, directory: Path | None, outcome: dict[str, Any]) -> None:
    # BaseException on purpose: sys.exit() or KeyboardInterrupt raised by the module's own
    # code are the module's doing, reported as such; a real Ctrl-C reaches the main thread.
    try:
        outcome["module"] = _import_beside(module_name, directory)
    except BaseException as exc:
        outcome["error"] = exc


def _import_beside(module_name: str, directory: Path | None) -> Any:
    """Imports ``module_name``, looking first beside the scenario file, so that a user's
    ``sop = "my_team:SOP"`` works with ``my_team.py`` next to the scenario, wherever
    ``sopbus`` is run from."""
    if directory is None or str(directory) in sys.path:
        return importlib.import_module(module_name)
    sys.path.insert(0, str(directory))
    try:
        return importlib.import_module(module_name)
    finally:
        sys.path.remove(str(directory))


def _raise_for(exc: BaseException, module_name: str, where: str, file: str, kind: str) -> Any:
    named = f"the {kind} module {module_name!r} named at {where}"
    if isinstance(exc, ImportError):
        raise ConfigError(
            f"{file}cannot import {named}: {exc}; check the name and that the module is "
            f"on PYTHONPATH"
        ) from None
    raise ConfigError(
        f"{file}{named} failed while it was imported: {raised_at(exc)}; {_fix(exc, kind)}"
    ) from None


def _fix(exc: BaseException, kind: str) -> str:
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    if isinstance(exc, SystemExit):
        return (
            f"{article} {kind} module must not exit when it is imported: remove the sys.exit call"
        )
    if isinstance(exc, KeyboardInterrupt):
        return f"{article} {kind} module must not raise KeyboardInterrupt when it is imported: remove it"
    return "fix the module"


def raised_at(exc: BaseException) -> str:
    """``RuntimeError: boom (at my_team.py, line 3)``: the exception and the last frame it
    passed that is not the import machinery (for a SyntaxError, its own file and line);
    ``sys.exit(7)`` is shown as ``sys.exit(7)``."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (at {exc.filename}, line {exc.lineno})"
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<frozen")
    ]
    own = [f for f in frames if Path(f.filename).resolve().parent != _HERE]
    at = f" (at {own[-1].filename}, line {own[-1].lineno})" if own else ""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}){at}"
    text = f": {exc}" if str(exc) else ""
    return f"{type(exc).__name__}{text}{at}"


def _shown(module_name: str, directory: Path | None) -> str:
    """The file of a module that is still importing (it is in ``sys.modules`` by then), or
    where it would be found; its name when neither is known."""
    module = sys.modules.get(module_name)
    found = getattr(module, "__file__", None)
    if found:
        return str(found)
    candidate = (
        (directory / Path(*module_name.split("."))).with_suffix(".py") if directory else None
    )
    if candidate is not None and candidate.is_file():
        return str(candidate)
    return f"module {module_name}"
