"""Running model-written code in a scratch directory with limits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._local import SandboxLimits as SandboxLimits
    from ._local import SandboxResult as SandboxResult
    from ._local import run_sandboxed as run_sandboxed

_WHERE: dict[str, str] = {
    "SandboxLimits": "._local",
    "SandboxResult": "._local",
    "run_sandboxed": "._local",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
