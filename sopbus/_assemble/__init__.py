"""Putting the parts together: a scenario becomes a team, a provider, a gateway, a run store
and a run (:func:`execute`), with the keys and endpoints of the environment over ``./.env``
(:func:`run_environ`). The Python API, the command line and sweeps all run scenarios
through here; the engine below (``sopbus.bus``) knows neither roles nor SOPs.
"""

# Lazy, as ``sopbus.bus``: the command line imports this package for small helpers and
# must not load trio, pydantic or the roles to answer ``--help``.
from __future__ import annotations

from typing import TYPE_CHECKING

from sopbus.bus._util._lazy import lazy_exports

if TYPE_CHECKING:
    from ._environ import run_environ as run_environ
    from ._execute import Outcome as Outcome
    from ._execute import Preflight as Preflight
    from ._execute import execute as execute
    from ._execute import preflight as preflight
    from ._execute import scenario_as_run as scenario_as_run
    from ._logs import configure_logging as configure_logging
    from ._logs import quiet_for_the_api as quiet_for_the_api

_WHERE: dict[str, str] = {
    "run_environ": "._environ",
    "Outcome": "._execute",
    "Preflight": "._execute",
    "execute": "._execute",
    "preflight": "._execute",
    "scenario_as_run": "._execute",
    "configure_logging": "._logs",
    "quiet_for_the_api": "._logs",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
