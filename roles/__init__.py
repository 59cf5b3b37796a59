"""Roles and actions: who does what on the bus.

An :class:`Action` turns messages into a validated output (a model call with repairs, or
any code). A :class:`Role` watches actions by name, remembers what it sees, and runs its
actions ``by_order``, by the model's pick (``react``), or by a plan (``plan_and_act``).
Both are declared as Python subclasses or from a scenario file (:func:`declare_action`,
:func:`declare_role`); a :class:`Registry` finds them by name.
"""

from ._action import Action as Action
from ._action import ActionContext as ActionContext
from ._action import ActionResult as ActionResult
from ._action import UserRequirement as UserRequirement
from ._declare import action_from_spec as action_from_spec
from ._declare import declare_action as declare_action
from ._declare import declare_role as declare_role
from ._declare import output_model as output_model
from ._declare import role_with_overrides as role_with_overrides
from ._llm import LLMSettings as LLMSettings
from ._llm import ask_model as ask_model
from ._llm import layered as layered
from ._memory import Memory as Memory
from ._population import Population as Population
from ._prompt import render_output as render_output
from ._react import DONE as DONE
from ._react import PLAN as PLAN
from ._react import THINK as THINK
from ._registry import Registry as Registry
from ._registry import registry as registry
from ._remote import RemoteAction as RemoteAction
from ._remote import agent_name as agent_name
from ._remote import declare_remote_action as declare_remote_action
from ._role import ActionRef as ActionRef
from ._role import LLMLike as LLMLike
from ._role import ReactMode as ReactMode
from ._role import Role as Role
from ._role import WatchRef as WatchRef
from ._shard import PopulationShard as PopulationShard
from ._shard import population_shards as population_shards
from ._shard import shard_name as shard_name
from ._shard import shard_range as shard_range
from ._shard import shard_tally as shard_tally
from ._tools import PythonTools as PythonTools
from ._tools import Tool as Tool
from ._tools import tool as tool
from ._watch import Watch as Watch

__all__ = [
    "DONE",
    "PLAN",
    "THINK",
    "Action",
    "ActionContext",
    "ActionRef",
    "ActionResult",
    "LLMLike",
    "LLMSettings",
    "Memory",
    "Population",
    "PopulationShard",
    "PythonTools",
    "ReactMode",
    "Registry",
    "RemoteAction",
    "Role",
    "Tool",
    "UserRequirement",
    "Watch",
    "WatchRef",
    "action_from_spec",
    "agent_name",
    "ask_model",
    "declare_action",
    "declare_remote_action",
    "declare_role",
    "layered",
    "output_model",
    "population_shards",
    "registry",
    "render_output",
    "role_with_overrides",
    "shard_name",
    "shard_range",
    "shard_tally",
    "tool",
]
