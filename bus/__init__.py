"""sopbus's engine: messages, the Environment and its routing, the run loop, the run store,
the LLM gateway with its providers, prices, budget and cost ledger, and scenario loading.

``sopbus.bus`` imports neither ``sopbus.roles`` nor ``sopbus.sops``; ``sopbus._assemble``
puts them together into a run. The names here are those the rest of sopbus (and its
tests) use; a user's code needs only ``sopbus``'s own.
"""

# Lazy on purpose: `sopbus --help` must answer in well under a second, and importing
# everything here would load trio, openai, pydantic and the BPE tables first. Each name is
# imported from its module on first use; type checkers see the plain imports below.
from __future__ import annotations

from typing import TYPE_CHECKING

from ._util._lazy import lazy_exports

if TYPE_CHECKING:
    from ._environment import Environment as Environment
    from ._errors import BudgetExhausted as BudgetExhausted
    from ._errors import ConfigError as ConfigError
    from ._errors import ModelOutputError as ModelOutputError
    from ._errors import ProviderError as ProviderError
    from ._errors import ProviderOverrun as ProviderOverrun
    from ._errors import SopbusError as SopbusError
    from ._errors import StopRun as StopRun
    from ._errors import ToolServerError as ToolServerError
    from ._errors import exception_leaves as exception_leaves
    from ._events import decode_event as decode_event
    from ._events import logical_view as logical_view
    from ._events import message_sequence as message_sequence
    from ._events import read_events as read_events
    from ._member import Member as Member
    from ._member import Turn as Turn
    from ._message import Message as Message
    from ._protocol import ChatMessage as ChatMessage
    from ._protocol import Completion as Completion
    from ._protocol import LLMRequest as LLMRequest
    from ._protocol import Provider as Provider
    from ._protocol import Usage as Usage
    from ._run import Injection as Injection
    from ._run import Runner as Runner
    from ._run import RunResult as RunResult
    from ._run import StopCondition as StopCondition
    from ._run import WriteArtifact as WriteArtifact
    from ._run import run_team as run_team
    from ._summary import RunSummary as RunSummary
    from ._summary import read_summary as read_summary
    from ._util._jsonl import JsonlWriter as JsonlWriter
    from ._util._jsonl import read_jsonl as read_jsonl
    from ._util._suggest import closest as closest
    from ._util._suggest import did_you_mean as did_you_mean
    from ._util._userfiles import read_user_text as read_user_text
    from ._util._userfiles import read_user_toml as read_user_toml
    from ._verdict import Judge as Judge
    from ._verdict import RunRecord as RunRecord
    from ._verdict import Verdict as Verdict
    from .llm._fixtures import load_fixtures as load_fixtures
    from .llm._gateway import Gateway as Gateway
    from .llm._human import HUMAN_MODEL as HUMAN_MODEL
    from .llm._openai import OpenAIProvider as OpenAIProvider
    from .llm._openai import openai_settings_from_env as openai_settings_from_env
    from .llm._replay import RecordingProvider as RecordingProvider
    from .llm._replay import ReplayProvider as ReplayProvider
    from .llm._replay import request_key as request_key
    from .llm._sim import SimProvider as SimProvider
    from .money._budget import Budget as Budget
    from .money._costs import cost_report as cost_report
    from .money._costs import ledger_csv as ledger_csv
    from .money._costs import load_ledger as load_ledger
    from .money._costs import render_table as render_table
    from .money._costs import report_json as report_json
    from .money._costs import reprice as reprice
    from .money._ledger import LedgerLine as LedgerLine
    from .money._ledger import without_wall_clock as without_wall_clock
    from .money._prices import PriceBook as PriceBook
    from .money._quote import Price as Price
    from .sandbox._run import run_sandboxed as run_sandboxed
    from .sandbox._settings import SandboxSettings as SandboxSettings
    from .sandbox._types import SandboxLimits as SandboxLimits
    from .sandbox._types import SandboxResult as SandboxResult
    from .scenario._load import load_scenario as load_scenario
    from .scenario._load import scenario_to_builtins as scenario_to_builtins
    from .scenario._load import scenario_warnings as scenario_warnings
    from .scenario._load import scenario_with_overrides as scenario_with_overrides
    from .scenario._types import InjectSpec as InjectSpec
    from .scenario._types import LLMConfig as LLMConfig
    from .scenario._types import LLMOverrides as LLMOverrides
    from .scenario._types import RoleSpec as RoleSpec
    from .scenario._types import Scenario as Scenario
    from .scenario._types import ScenarioDoc as ScenarioDoc
    from .scenario._typespec import TypeSpecError as TypeSpecError
    from .scenario._typespec import parse_type_spec as parse_type_spec
    from .store._store import RunStore as RunStore
    from .store._store import new_run_id as new_run_id
    from .store._verify import ReceiptError as ReceiptError
    from .store._verify import issue_receipt as issue_receipt
    from .store._verify import require_receipt as require_receipt
    from .store._verify import verify_run as verify_run

_WHERE: dict[str, str] = {
    "BudgetExhausted": "._errors",
    "ConfigError": "._errors",
    "ModelOutputError": "._errors",
    "ProviderError": "._errors",
    "ProviderOverrun": "._errors",
    "SopbusError": "._errors",
    "ToolServerError": "._errors",
    "StopRun": "._errors",
    "exception_leaves": "._errors",
    "JsonlWriter": "._util._jsonl",
    "read_jsonl": "._util._jsonl",
    "read_user_text": "._util._userfiles",
    "read_user_toml": "._util._userfiles",
    "ChatMessage": "._protocol",
    "Completion": "._protocol",
    "LLMRequest": "._protocol",
    "Provider": "._protocol",
    "Usage": "._protocol",
    "Member": "._member",
    "Turn": "._member",
    "Message": "._message",
    "SandboxSettings": ".sandbox._settings",
    "SandboxLimits": ".sandbox._types",
    "SandboxResult": ".sandbox._types",
    "run_sandboxed": ".sandbox._run",
    "Environment": "._environment",
    "logical_view": "._events",
    "message_sequence": "._events",
    "decode_event": "._events",
    "read_events": "._events",
    "Injection": "._run",
    "RunResult": "._run",
    "Runner": "._run",
    "StopCondition": "._run",
    "WriteArtifact": "._run",
    "run_team": "._run",
    "Judge": "._verdict",
    "RunRecord": "._verdict",
    "Verdict": "._verdict",
    "RunSummary": "._summary",
    "read_summary": "._summary",
    "RunStore": ".store._store",
    "new_run_id": ".store._store",
    "Budget": ".money._budget",
    "cost_report": ".money._costs",
    "ledger_csv": ".money._costs",
    "load_ledger": ".money._costs",
    "render_table": ".money._costs",
    "report_json": ".money._costs",
    "reprice": ".money._costs",
    "Gateway": ".llm._gateway",
    "LedgerLine": ".money._ledger",
    "without_wall_clock": ".money._ledger",
    "OpenAIProvider": ".llm._openai",
    "openai_settings_from_env": ".llm._openai",
    "Price": ".money._quote",
    "PriceBook": ".money._prices",
    "RecordingProvider": ".llm._replay",
    "ReplayProvider": ".llm._replay",
    "request_key": ".llm._replay",
    "HUMAN_MODEL": ".llm._human",
    "SimProvider": ".llm._sim",
    "load_fixtures": ".llm._fixtures",
    "load_scenario": ".scenario._load",
    "scenario_to_builtins": ".scenario._load",
    "scenario_warnings": ".scenario._load",
    "scenario_with_overrides": ".scenario._load",
    "InjectSpec": ".scenario._types",
    "LLMOverrides": ".scenario._types",
    "LLMConfig": ".scenario._types",
    "RoleSpec": ".scenario._types",
    "Scenario": ".scenario._types",
    "ScenarioDoc": ".scenario._types",
    "ReceiptError": ".store._verify",
    "issue_receipt": ".store._verify",
    "require_receipt": ".store._verify",
    "verify_run": ".store._verify",
    "closest": "._util._suggest",
    "did_you_mean": "._util._suggest",
    "TypeSpecError": ".scenario._typespec",
    "parse_type_spec": ".scenario._typespec",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
