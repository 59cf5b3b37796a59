"""The engine's small utilities, used across ``sopbus.bus`` and not part of the bus itself:
append-only JSON-lines files (``_jsonl``), the names of a run directory's files
(``_layout``), directory locks (``_dirlock``), credentials out of what a run writes
(``_redact``), "did you mean" hints (``_suggest``), reading a user's files (``_userfiles``),
lazy package faces (``_lazy``), text wrapped for a reader (``_wrap``) and the crash tests' fault points (``_faults``).

Modules of ``sopbus.bus`` import them from here; everything else finds the few it needs on
``sopbus.bus``'s own face.
"""

# Lazy like sopbus.bus's face: the CLI's light modules read the run directory's file names
# from here, and must not load msgspec for it.
from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:
    from ._dirlock import try_lock as try_lock
    from ._faults import arm as arm
    from ._faults import reached as reached
    from ._jsonl import JsonlWriter as JsonlWriter
    from ._jsonl import encode_json as encode_json
    from ._jsonl import read_jsonl as read_jsonl
    from ._layout import ARTIFACTS as ARTIFACTS
    from ._layout import CALLS as CALLS
    from ._layout import COSTS as COSTS
    from ._layout import EVENTS as EVENTS
    from ._layout import RECEIPTS as RECEIPTS
    from ._layout import SANDBOX_SCRATCH as SANDBOX_SCRATCH
    from ._layout import SCENARIO as SCENARIO
    from ._layout import SUMMARY as SUMMARY
    from ._lazy import lazy_exports as lazy_exports
    from ._redact import MASK as MASK
    from ._redact import Redactor as Redactor
    from ._redact import redact_url as redact_url
    from ._redact import url_secrets as url_secrets
    from ._suggest import closest as closest
    from ._suggest import did_you_mean as did_you_mean
    from ._userfiles import decode_user_text as decode_user_text
    from ._userfiles import nesting_depth as nesting_depth
    from ._userfiles import not_regular as not_regular
    from ._userfiles import read_user_bytes as read_user_bytes
    from ._userfiles import read_user_text as read_user_text
    from ._userfiles import read_user_toml as read_user_toml
    from ._wrap import wrap_text as wrap_text

_WHERE: dict[str, str] = {
    "lazy_exports": "._lazy",
    "reached": "._faults",
    "arm": "._faults",
    "SANDBOX_SCRATCH": "._layout",
    "SUMMARY": "._layout",
    "EVENTS": "._layout",
    "CALLS": "._layout",
    "COSTS": "._layout",
    "ARTIFACTS": "._layout",
    "SCENARIO": "._layout",
    "RECEIPTS": "._layout",
    "redact_url": "._redact",
    "MASK": "._redact",
    "Redactor": "._redact",
    "url_secrets": "._redact",
    "JsonlWriter": "._jsonl",
    "read_jsonl": "._jsonl",
    "encode_json": "._jsonl",
    "closest": "._suggest",
    "did_you_mean": "._suggest",
    "read_user_text": "._userfiles",
    "read_user_toml": "._userfiles",
    "nesting_depth": "._userfiles",
    "decode_user_text": "._userfiles",
    "read_user_bytes": "._userfiles",
    "not_regular": "._userfiles",
    "try_lock": "._dirlock",
    "wrap_text": "._wrap",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
