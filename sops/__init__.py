"""Procedures (SOPs): which roles a team has, what each watches, how a run starts and
stops. Built-in SOPs are the public modules of this package, each with a ``SOP`` value."""

from ._sop import SOP as SOP
from ._sop import SopContext as SopContext
from ._sop import Team as Team
from ._sop import builtin_sops as builtin_sops
from ._sop import get_sop as get_sop
from ._sop import options_as as options_as
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

__all__ = [
    "SOP",
    "AllOf",
    "AnyOf",
    "MaxMessages",
    "SopContext",
    "SpendLimit",
    "Team",
    "TextMention",
    "Timeout",
    "TokenLimit",
    "WatchGraph",
    "build_team",
    "builtin_sops",
    "get_sop",
    "llm_defaults",
    "options_as",
    "team_warnings",
    "watch_graph",
]
