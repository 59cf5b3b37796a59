"""Putting the parts together: a scenario becomes a team, a provider, a gateway, a run store
and a run (:func:`execute`), with the keys and endpoints of the environment over ``./.env``
(:func:`run_environ`). The Python API, the command line and sweeps all run scenarios
through here; the engine below (``sopbus.bus``) knows neither roles nor SOPs.
"""

# Lazy, as ``sopbus.bus``: the command line imports this package for small helpers and
# must not load trio, pydantic or the roles to answer ``--help``.
from __future__ import annotations

from typing import TYPE_CHECKING

from sopbus.bus import lazy_exports

if TYPE_CHECKING:
    from ._bus import WAIT_S as WAIT_S
    from ._bus import BusOptions as BusOptions
    from ._bus import probe as probe
    from ._environ import run_environ as run_environ
    from ._execute import Outcome as Outcome
    from ._execute import Preflight as Preflight
    from ._execute import execute as execute
    from ._execute import preflight as preflight
    from ._execute import scenario_as_run as scenario_as_run
    from ._logs import configure_logging as configure_logging
    from ._logs import quiet_for_the_api as quiet_for_the_api
    from ._provider import checked_prices as checked_prices
    from ._provider import endpoint as endpoint
    from ._provider import make_provider as make_provider
    from ._provider import provider_spec as provider_spec
    from ._provider import run_secrets as run_secrets
    from ._provider import with_people as with_people
    from ._provider import with_whole_url as with_whole_url
    from ._recheck import Recheck as Recheck
    from ._recheck import recheck_messages as recheck_messages
    from ._shards import worker_shards as worker_shards
    from ._tools import check_named as check_named
    from ._tools import check_servers as check_servers
    from ._tools import in_workspace as in_workspace
    from ._tools import opened_tools as opened_tools
    from ._worst import Worst as Worst
    from ._worst import refuse_short_cap as refuse_short_cap
    from ._worst import worst_cases as worst_cases
    from ._worst import worst_lines as worst_lines

_WHERE: dict[str, str] = {
    "run_environ": "._environ",
    "Outcome": "._execute",
    "Preflight": "._execute",
    "execute": "._execute",
    "preflight": "._execute",
    "scenario_as_run": "._execute",
    "configure_logging": "._logs",
    "quiet_for_the_api": "._logs",
    "WAIT_S": "._bus",
    "BusOptions": "._bus",
    "probe": "._bus",
    "worker_shards": "._shards",
    "endpoint": "._provider",
    "checked_prices": "._provider",
    "make_provider": "._provider",
    "run_secrets": "._provider",
    "with_people": "._provider",
    "with_whole_url": "._provider",
    "provider_spec": "._provider",
    "check_servers": "._tools",
    "check_named": "._tools",
    "in_workspace": "._tools",
    "opened_tools": "._tools",
    "Recheck": "._recheck",
    "recheck_messages": "._recheck",
    "Worst": "._worst",
    "worst_cases": "._worst",
    "worst_lines": "._worst",
    "refuse_short_cap": "._worst",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
