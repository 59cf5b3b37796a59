"""The engine's small utilities, used across ``sopbus.bus`` and not part of the bus itself:
append-only JSON-lines files (``_jsonl``), the names of a run directory's files
(``_layout``), directory locks (``_dirlock``), credentials out of what a run writes
(``_redact``), "did you mean" hints (``_suggest``), reading a user's files (``_userfiles``),
lazy package faces (``_lazy``) and the crash tests' fault points (``_faults``).

Modules of ``sopbus.bus`` import them from here; everything else finds the few it needs on
``sopbus.bus``'s own face.
"""

# Lazy like sopbus.bus's face: the CLI's light modules read the run directory's file names
# from here, and must not load msgspec for it.
from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from ._lazy import lazy_exports as lazy_exports

_WHERE: dict[str, str] = {
    "lazy_exports": "._lazy",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
