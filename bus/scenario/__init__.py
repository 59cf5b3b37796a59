"""Scenario files: their types (frozen msgspec Structs), loading and overrides, the
error messages that name the file, the place and the fix, and the type specs of declared
action outputs.
"""

from ._errors import explain_syntax_error as explain_syntax_error
from ._errors import explain_validation_error as explain_validation_error
from ._errors import format_path as format_path
from ._load import check_scenario as check_scenario
from ._load import load_scenario as load_scenario
from ._load import scenario_to_builtins as scenario_to_builtins
from ._load import scenario_warnings as scenario_warnings
from ._load import scenario_with_overrides as scenario_with_overrides
from ._names import ROLE_NAME_FIX as ROLE_NAME_FIX
from ._names import role_name_problem as role_name_problem
from ._price import price_spec as price_spec
from ._tools import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS
from ._tools import DEFAULT_MAX_TOOL_STEPS as DEFAULT_MAX_TOOL_STEPS
from ._tools import TOOL_CHOICES as TOOL_CHOICES
from ._tools import McpServer as McpServer
from ._tools import ToolChoice as ToolChoice
from ._types import ActionSpec as ActionSpec
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
from ._typespec import TYPE_SPECS as TYPE_SPECS
from ._typespec import TypeSpecError as TypeSpecError
from ._typespec import parse_type_spec as parse_type_spec

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "DEFAULT_MAX_TOOL_STEPS",
    "ROLE_NAME_FIX",
    "TOOL_CHOICES",
    "TYPE_SPECS",
    "ActionSpec",
    "InjectSpec",
    "LLMConfig",
    "LLMOverrides",
    "McpServer",
    "PriceSpec",
    "RoleSpec",
    "RunSettings",
    "Scenario",
    "ScenarioDoc",
    "ScenarioInfo",
    "SweepSpec",
    "ToolChoice",
    "TypeSpecError",
    "check_scenario",
    "explain_syntax_error",
    "explain_validation_error",
    "format_path",
    "load_scenario",
    "parse_type_spec",
    "price_spec",
    "role_name_problem",
    "scenario_to_builtins",
    "scenario_warnings",
    "scenario_with_overrides",
]
