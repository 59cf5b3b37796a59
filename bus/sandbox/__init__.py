"""Running model-written code: one entry point, two backends.

:func:`run_sandboxed` runs a command in a fresh scratch directory with limits and returns a
:class:`SandboxResult`. The ``bwrap`` backend (:mod:`._bwrap`, bubblewrap: new namespaces,
read-only system, the scratch directory the only writable place) isolates it; the ``local``
backend (:mod:`._local`) only contains honest mistakes. :class:`SandboxSettings` chooses
between them (``auto``: bwrap when it works here) and :func:`using` scopes the choice to a run.
"""

from ._run import run_sandboxed as run_sandboxed
from ._scratch import sweep_stale as sweep_stale
from ._settings import UNISOLATED_WARNING as UNISOLATED_WARNING
from ._settings import SandboxSettings as SandboxSettings
from ._settings import check_backend as check_backend
from ._settings import using as using
from ._types import BACKENDS as BACKENDS
from ._types import SANDBOX_DIR as SANDBOX_DIR
from ._types import BackendName as BackendName
from ._types import SandboxLimits as SandboxLimits
from ._types import SandboxResult as SandboxResult

__all__ = [
    "BACKENDS",
    "SANDBOX_DIR",
    "UNISOLATED_WARNING",
    "BackendName",
    "SandboxLimits",
    "SandboxResult",
    "SandboxSettings",
    "check_backend",
    "run_sandboxed",
    "sweep_stale",
    "using",
]
