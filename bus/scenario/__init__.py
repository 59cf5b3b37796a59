"""Scenario files: their types (frozen msgspec Structs), loading and overrides, the
error messages that name the file, the place and the fix, and the type specs of declared
action outputs; the registry of the providers ``[llm].provider`` names (filled by the
providers' own modules, see :func:`register_provider`).
"""

# Lazy, as ``sopbus.bus``: the command line lists the registered providers in its help,
# and must not load the loader, msgspec's TOML and the type specs for it.
from __future__ import annotations

from typing import TYPE_CHECKING

from .._util import lazy_exports

if TYPE_CHECKING:
    from ._errors import explain_syntax_error as explain_syntax_error
    from ._errors import explain_validation_error as explain_validation_error
    from ._errors import format_path as format_path
    from ._graph import GraphSpec as GraphSpec
    from ._load import action_problems as action_problems
    from ._load import action_spec as action_spec
    from ._load import check_scenario as check_scenario
    from ._load import load_scenario as load_scenario
    from ._load import scenario_from_tables as scenario_from_tables
    from ._load import scenario_to_builtins as scenario_to_builtins
    from ._load import scenario_warnings as scenario_warnings
    from ._load import scenario_with_overrides as scenario_with_overrides
    from ._names import ROLE_NAME_FIX as ROLE_NAME_FIX
    from ._names import role_name_problem as role_name_problem
    from ._population import MAX_POPULATION as MAX_POPULATION
    from ._population import PopulationSpec as PopulationSpec
    from ._population import Range as Range
    from ._population import fill_profile as fill_profile
    from ._population import parse_attribute as parse_attribute
    from ._population import template_fields as template_fields
    from ._price import price_spec as price_spec
    from ._providers import ProviderFactory as ProviderFactory
    from ._providers import ProviderSpec as ProviderSpec
    from ._providers import every_provider as every_provider
    from ._providers import is_reference as is_reference
    from ._providers import listed_providers as listed_providers
    from ._providers import new_provider_spec as new_provider_spec
    from ._providers import provider_for as provider_for
    from ._providers import provider_names as provider_names
    from ._providers import provider_problem as provider_problem
    from ._providers import register_provider as register_provider
    from ._providers import simulated as simulated
    from ._tools import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS
    from ._tools import DEFAULT_MAX_TOOL_STEPS as DEFAULT_MAX_TOOL_STEPS
    from ._tools import TOOL_CHOICES as TOOL_CHOICES
    from ._tools import A2AAgent as A2AAgent
    from ._tools import McpServer as McpServer
    from ._tools import ToolChoice as ToolChoice
    from ._types import DEFAULT_PROVIDER as DEFAULT_PROVIDER
    from ._types import MAX_BUDGET_USD as MAX_BUDGET_USD
    from ._types import ActionSpec as ActionSpec
    from ._types import EvalSpec as EvalSpec
    from ._types import InjectSpec as InjectSpec
    from ._types import LLMConfig as LLMConfig
    from ._types import LLMOverrides as LLMOverrides
    from ._types import PriceSpec as PriceSpec
    from ._types import RoleSpec as RoleSpec
    from ._types import RunSettings as RunSettings
    from ._types import Scenario as Scenario
    from ._types import ScenarioDoc as ScenarioDoc
    from ._types import ScenarioInfo as ScenarioInfo
    from ._types import SweepSpec as SweepSpec
    from ._types import WatchSpec as WatchSpec
    from ._typespec import TYPE_SPECS as TYPE_SPECS
    from ._typespec import TypeSpecError as TypeSpecError
    from ._typespec import parse_type_spec as parse_type_spec

_WHERE: dict[str, str] = {
    "explain_syntax_error": "._errors",
    "explain_validation_error": "._errors",
    "format_path": "._errors",
    "action_problems": "._load",
    "action_spec": "._load",
    "check_scenario": "._load",
    "load_scenario": "._load",
    "scenario_from_tables": "._load",
    "scenario_to_builtins": "._load",
    "scenario_warnings": "._load",
    "scenario_with_overrides": "._load",
    "ROLE_NAME_FIX": "._names",
    "DEFAULT_PROVIDER": "._types",
    "EvalSpec": "._types",
    "ProviderFactory": "._providers",
    "ProviderSpec": "._providers",
    "every_provider": "._providers",
    "is_reference": "._providers",
    "listed_providers": "._providers",
    "provider_for": "._providers",
    "provider_names": "._providers",
    "provider_problem": "._providers",
    "new_provider_spec": "._providers",
    "register_provider": "._providers",
    "simulated": "._providers",
    "role_name_problem": "._names",
    "MAX_BUDGET_USD": "._types",
    "ActionSpec": "._types",
    "InjectSpec": "._types",
    "LLMConfig": "._types",
    "LLMOverrides": "._types",
    "PriceSpec": "._types",
    "RoleSpec": "._types",
    "WatchSpec": "._types",
    "GraphSpec": "._graph",
    "RunSettings": "._types",
    "Scenario": "._types",
    "ScenarioDoc": "._types",
    "ScenarioInfo": "._types",
    "SweepSpec": "._types",
    "TYPE_SPECS": "._typespec",
    "TypeSpecError": "._typespec",
    "parse_type_spec": "._typespec",
    "price_spec": "._price",
    "MAX_POPULATION": "._population",
    "PopulationSpec": "._population",
    "Range": "._population",
    "fill_profile": "._population",
    "parse_attribute": "._population",
    "template_fields": "._population",
    "DEFAULT_MAX_RESULT_CHARS": "._tools",
    "DEFAULT_MAX_TOOL_STEPS": "._tools",
    "TOOL_CHOICES": "._tools",
    "A2AAgent": "._tools",
    "McpServer": "._tools",
    "ToolChoice": "._tools",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
