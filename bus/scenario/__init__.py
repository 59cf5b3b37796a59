"""Scenario files: their types (frozen msgspec Structs), loading and overrides, the
error messages that name the file, the place and the fix, and the type specs of declared
action outputs.
"""

from ._errors import explain_syntax_error as explain_syntax_error
from ._errors import explain_validation_error as explain_validation_error
from ._errors import format_path as format_path
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
from ._typespec import TYPE_SPECS as TYPE_SPECS
from ._typespec import TypeSpecError as TypeSpecError
from ._typespec import parse_type_spec as parse_type_spec
