"""Procedures (SOPs): which roles a team has, what each watches, how a run starts and
stops. The built-in SOPs are the modules of ``sopbus.sops.builtin``, each with a ``SOP``
value; :func:`registered_sops` is every SOP a scenario can name by a plain word."""

from . import _aliases
from ._import import import_sop_module as import_sop_module
from ._populations import check_memory as check_memory
from ._sop import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._sop import SOP as SOP
from ._sop import SopContext as SopContext
from ._sop import SopEntry as SopEntry
from ._sop import Team as Team
from ._sop import builtin_sops as builtin_sops
from ._sop import get_sop as get_sop
from ._sop import options_as as options_as
from ._sop import registered_sops as registered_sops
from ._team import WatchGraph as WatchGraph
from ._team import build_team as build_team
from ._team import llm_defaults as llm_defaults
from ._team import team_warnings as team_warnings
from ._team import watch_graph as watch_graph
from ._termination import AllOf as AllOf
from ._termination import AnyOf as AnyOf
from ._termination import MaxMessages as MaxMessages
from ._termination import SpendLimit as SpendLimit
from ._termination import TextMention as TextMention
from ._termination import Timeout as Timeout
from ._termination import TokenLimit as TokenLimit

_aliases.install()

__all__ = [
    "ENTRY_POINT_GROUP",
    "SOP",
    "AllOf",
    "AnyOf",
    "MaxMessages",
    "SopContext",
    "SopEntry",
    "SpendLimit",
    "Team",
    "TextMention",
    "Timeout",
    "TokenLimit",
    "WatchGraph",
    "build_team",
    "builtin_sops",
    "check_memory",
    "get_sop",
    "import_sop_module",
    "llm_defaults",
    "options_as",
    "registered_sops",
    "team_warnings",
    "watch_graph",
]
