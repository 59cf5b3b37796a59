"""sopbus: teams of LLM agents that work by a standard operating procedure, on a
publish-subscribe bus, with a budget cap that is never passed.

    >>> import sopbus
    >>> result = sopbus.run_scenario("software_company", max_rounds=8)      # doctest: +SKIP
    >>> result.status, result.total_usd, sorted(result.artifacts())          # doctest: +SKIP

:func:`run_scenario` blocks (a script, a notebook cell); :func:`run_scenario_async` is for
trio programs and :func:`run_scenario_asyncio` for asyncio programs (``await`` it). Each
takes a scenario file's path or the name of a shipped scenario and returns a
:class:`RunOutcome`; :meth:`RunOutcome.open` reads an earlier run's directory. Mistakes in the
file, the overrides or the keys raise :class:`ConfigError` before anything runs.

A team of your own is a :class:`Team` in Python (``Role("Name", watch=[...],
actions=[...])``, ``Action(name, instruction, output={...})``) or a scenario file with the
same content, and where neither is enough, :class:`Role` and :class:`Action` subclasses and
an :class:`SOP` (whose ``build`` returns a :class:`sopbus.sops.Team`). Everything a user needs is
a name of this package; the subpackages (``sopbus.bus``, the engine; ``sopbus.roles``;
``sopbus.sops``) are there for extensions.
"""

# Lazy on purpose: `import sopbus` (and the `sopbus` command, which imports this package
# first) must not load trio, openai or pydantic before they are needed. Each name is
# imported from its module on first use; type checkers see the plain imports below.
from __future__ import annotations

from typing import TYPE_CHECKING

from .bus import lazy_exports

if TYPE_CHECKING:
    from ._api import OVERRIDES as OVERRIDES
    from ._api import run_scenario as run_scenario
    from ._api import run_scenario_async as run_scenario_async
    from ._api import run_scenario_asyncio as run_scenario_asyncio
    from ._outcome import RunOutcome as RunOutcome
    from ._team import Team as Team
    from .bus import BudgetExhausted as BudgetExhausted
    from .bus import ConfigError as ConfigError
    from .bus import Message as Message
    from .bus import ModelOutputError as ModelOutputError
    from .bus import ProviderError as ProviderError
    from .bus import ProviderOverrun as ProviderOverrun
    from .bus import RunRecord as RunRecord
    from .bus import RunSummary as RunSummary
    from .bus import SopbusError as SopbusError
    from .bus import StopRun as StopRun
    from .bus import ToolServerError as ToolServerError
    from .bus import Turn as Turn
    from .bus import Verdict as Verdict
    from .bus import read_events as read_events
    from .bus.nats import NatsUnavailable as NatsUnavailable
    from .eval import evaluate as evaluate
    from .roles import Action as Action
    from .roles import ActionContext as ActionContext
    from .roles import ActionResult as ActionResult
    from .roles import LLMSettings as LLMSettings
    from .roles import Role as Role
    from .roles import Tool as Tool
    from .roles import Watch as Watch
    from .roles import tool as tool
    from .sops import SOP as SOP
    from .sops import SopContext as SopContext
    from .sweep import WorkerDied as WorkerDied

_WHERE: dict[str, str] = {
    "OVERRIDES": "._api",
    "run_scenario": "._api",
    "run_scenario_async": "._api",
    "run_scenario_asyncio": "._api",
    "RunOutcome": "._outcome",
    "Team": "._team",
    "BudgetExhausted": ".bus",
    "ConfigError": ".bus",
    "Message": ".bus",
    "ModelOutputError": ".bus",
    "ProviderError": ".bus",
    "ProviderOverrun": ".bus",
    "RunRecord": ".bus",
    "RunSummary": ".bus",
    "SopbusError": ".bus",
    "StopRun": ".bus",
    "ToolServerError": ".bus",
    "Turn": ".bus",
    "Verdict": ".bus",
    "read_events": ".bus",
    "NatsUnavailable": ".bus.nats",
    "Action": ".roles",
    "ActionContext": ".roles",
    "ActionResult": ".roles",
    "LLMSettings": ".roles",
    "Role": ".roles",
    "Tool": ".roles",
    "Watch": ".roles",
    "tool": ".roles",
    "SOP": ".sops",
    "SopContext": ".sops",
    "evaluate": ".eval",
    "WorkerDied": ".sweep",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
