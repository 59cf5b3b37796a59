"""sopbus for Python programs: run a scenario file and get its outcome back.

    >>> from sopbus import run_scenario
    >>> result = run_scenario("scenarios/software_company.toml", max_rounds=8)  # doctest: +SKIP
    >>> result.status, result.total_usd, sorted(result.artifacts())            # doctest: +SKIP

:func:`run_scenario` blocks (a script, a notebook cell); :func:`run_scenario_async` is for
trio programs and :func:`run_scenario_asyncio` for asyncio programs (``await`` it). Each
returns a :class:`RunOutcome`; :meth:`RunOutcome.open` reads an earlier run's directory.
Mistakes in the file, the overrides or the keys raise :class:`ConfigError` before anything
runs.

This package sits on top of the others (``sopbus -> sops -> roles -> bus``): like the
``sopbus`` command, it assembles a team from a scenario, through ``bus.cli.execute``.
"""

from __future__ import annotations

from bus import ConfigError as ConfigError

from ._api import OVERRIDES as OVERRIDES
from ._api import run_scenario as run_scenario
from ._api import run_scenario_async as run_scenario_async
from ._api import run_scenario_asyncio as run_scenario_asyncio
from ._outcome import RunOutcome as RunOutcome
from ._outcome import Verdict as Verdict

__all__ = ["OVERRIDES", "ConfigError", "RunOutcome", "Verdict", "run_scenario",
           "run_scenario_async", "run_scenario_asyncio"]
