"""sopbus's engine: messages, the Environment and its routing, the run loop, the run store,
the LLM gateway with its providers, prices, budget and cost ledger, and scenario loading.

``bus`` imports neither ``roles`` nor ``sops``; the CLI (``bus.cli``) is the one place
where everything is assembled.
"""

# Lazy on purpose: `sopbus --help` must answer in well under a second, and importing
# everything here would load trio, openai, pydantic and the BPE tables first. Each name is
# imported from its module on first use; type checkers see the plain imports below.
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import BudgetExhausted as BudgetExhausted
    from ._errors import ConfigError as ConfigError
    from ._errors import ModelOutputError as ModelOutputError
    from ._errors import ProviderError as ProviderError
    from ._errors import SopbusError as SopbusError
    from ._errors import StopRun as StopRun
    from ._jsonl import JsonlWriter as JsonlWriter
    from ._jsonl import read_jsonl as read_jsonl
    from ._llm import ChatMessage as ChatMessage
    from ._llm import Completion as Completion
    from ._llm import LLMRequest as LLMRequest
    from ._llm import Provider as Provider
    from ._llm import Usage as Usage
    from ._member import LLMGateway as LLMGateway
    from ._member import Member as Member
    from ._member import Turn as Turn
    from ._member import TurnServices as TurnServices
    from ._message import Message as Message
    from ._sandbox import SandboxLimits as SandboxLimits
    from ._sandbox import SandboxResult as SandboxResult
    from ._sandbox import run_sandboxed as run_sandboxed
    from ._environment import Environment as Environment
    from ._events import logical_view as logical_view
    from ._events import decode_event as decode_event
    from ._run import END_REASONS as END_REASONS
    from ._run import Injection as Injection
    from ._run import RunResult as RunResult
    from ._run import Runner as Runner
    from ._run import StopCondition as StopCondition
    from ._run import run_team as run_team
    from ._store import RunStore as RunStore
    from ._store import new_run_id as new_run_id
    from ._budget import Budget as Budget
    from ._budget import Reservation as Reservation
    from ._costs import cost_report as cost_report
    from ._costs import ledger_csv as ledger_csv
    from ._costs import load_ledger as load_ledger
    from ._costs import render_table as render_table
    from ._costs import report_json as report_json
    from ._costs import reprice as reprice
    from ._gateway import Gateway as Gateway
    from ._gateway import LedgerSink as LedgerSink
    from ._ledger import WALL_CLOCK_FIELDS as WALL_CLOCK_FIELDS
    from ._ledger import LedgerLine as LedgerLine
    from ._ledger import without_wall_clock as without_wall_clock
    from ._openai import OpenAIProvider as OpenAIProvider
    from ._openai import OpenAISettings as OpenAISettings
    from ._openai import openai_settings_from_env as openai_settings_from_env
    from ._prices import Price as Price
    from ._prices import PriceBook as PriceBook
    from ._replay import RecordingProvider as RecordingProvider
    from ._replay import ReplayProvider as ReplayProvider
    from ._replay import request_key as request_key
    from ._fixtures import Fixture as Fixture
    from ._sim import SimProvider as SimProvider
    from ._fixtures import load_fixtures as load_fixtures
    from ._scenario import check_scenario as check_scenario
    from ._scenario import load_scenario as load_scenario
    from ._scenario import scenario_to_builtins as scenario_to_builtins
    from ._scenario import scenario_warnings as scenario_warnings
    from ._scenario import scenario_with_overrides as scenario_with_overrides
    from ._scenario_types import ActionSpec as ActionSpec
    from ._scenario_types import InjectSpec as InjectSpec
    from ._scenario_types import LLMOverrides as LLMOverrides
    from ._scenario_types import LLMSettings as LLMSettings
    from ._scenario_types import PriceSpec as PriceSpec
    from ._scenario_types import RoleSpec as RoleSpec
    from ._scenario_types import RunSettings as RunSettings
    from ._scenario_types import Scenario as Scenario
    from ._scenario_types import ScenarioDoc as ScenarioDoc
    from ._scenario_types import ScenarioInfo as ScenarioInfo
    from ._verify import Receipt as Receipt
    from ._verify import ReceiptError as ReceiptError
    from ._verify import RunVerdict as RunVerdict
    from ._verify import issue_receipt as issue_receipt
    from ._verify import require_receipt as require_receipt
    from ._verify import verify_run as verify_run
    from ._suggest import closest as closest
    from ._suggest import did_you_mean as did_you_mean
    from ._typespec import TypeSpecError as TypeSpecError
    from ._typespec import parse_type_spec as parse_type_spec

_WHERE: dict[str, str] = {
    "BudgetExhausted": "._errors",
    "ConfigError": "._errors",
    "ModelOutputError": "._errors",
    "ProviderError": "._errors",
    "SopbusError": "._errors",
    "StopRun": "._errors",
    "JsonlWriter": "._jsonl",
    "read_jsonl": "._jsonl",
    "ChatMessage": "._llm",
    "Completion": "._llm",
    "LLMRequest": "._llm",
    "Provider": "._llm",
    "Usage": "._llm",
    "LLMGateway": "._member",
    "Member": "._member",
    "Turn": "._member",
    "TurnServices": "._member",
    "Message": "._message",
    "SandboxLimits": "._sandbox",
    "SandboxResult": "._sandbox",
    "run_sandboxed": "._sandbox",
    "Environment": "._environment",
    "logical_view": "._events",
    "decode_event": "._events",
    "END_REASONS": "._run",
    "Injection": "._run",
    "RunResult": "._run",
    "Runner": "._run",
    "StopCondition": "._run",
    "run_team": "._run",
    "RunStore": "._store",
    "new_run_id": "._store",
    "Budget": "._budget",
    "Reservation": "._budget",
    "cost_report": "._costs",
    "ledger_csv": "._costs",
    "load_ledger": "._costs",
    "render_table": "._costs",
    "report_json": "._costs",
    "reprice": "._costs",
    "Gateway": "._gateway",
    "LedgerSink": "._gateway",
    "WALL_CLOCK_FIELDS": "._ledger",
    "LedgerLine": "._ledger",
    "without_wall_clock": "._ledger",
    "OpenAIProvider": "._openai",
    "OpenAISettings": "._openai",
    "openai_settings_from_env": "._openai",
    "Price": "._prices",
    "PriceBook": "._prices",
    "RecordingProvider": "._replay",
    "ReplayProvider": "._replay",
    "request_key": "._replay",
    "Fixture": "._fixtures",
    "SimProvider": "._sim",
    "load_fixtures": "._fixtures",
    "check_scenario": "._scenario",
    "load_scenario": "._scenario",
    "scenario_to_builtins": "._scenario",
    "scenario_warnings": "._scenario",
    "scenario_with_overrides": "._scenario",
    "ActionSpec": "._scenario_types",
    "InjectSpec": "._scenario_types",
    "LLMOverrides": "._scenario_types",
    "LLMSettings": "._scenario_types",
    "PriceSpec": "._scenario_types",
    "RoleSpec": "._scenario_types",
    "RunSettings": "._scenario_types",
    "Scenario": "._scenario_types",
    "ScenarioDoc": "._scenario_types",
    "ScenarioInfo": "._scenario_types",
    "Receipt": "._verify",
    "ReceiptError": "._verify",
    "RunVerdict": "._verify",
    "issue_receipt": "._verify",
    "require_receipt": "._verify",
    "verify_run": "._verify",
    "closest": "._suggest",
    "did_you_mean": "._suggest",
    "TypeSpecError": "._typespec",
    "parse_type_spec": "._typespec",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'bus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
