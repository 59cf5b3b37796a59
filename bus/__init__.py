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

from ._util import lazy_exports

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
    from ._errors import ToolServerSetupError as ToolServerSetupError
    from ._errors import exception_leaves as exception_leaves
    from ._events import MESSAGE_KINDS as MESSAGE_KINDS
    from ._events import RunEnded as RunEnded
    from ._events import RunStarted as RunStarted
    from ._events import decode_event as decode_event
    from ._events import logical_view as logical_view
    from ._events import message_sequence as message_sequence
    from ._events import read_events as read_events
    from ._member import Crowd as Crowd
    from ._member import Member as Member
    from ._member import Turn as Turn
    from ._message import Message as Message
    from ._protocol import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
    from ._protocol import Answers as Answers
    from ._protocol import ChatMessage as ChatMessage
    from ._protocol import Completion as Completion
    from ._protocol import LLMRequest as LLMRequest
    from ._protocol import Provider as Provider
    from ._protocol import ProviderBase as ProviderBase
    from ._protocol import ToolCall as ToolCall
    from ._protocol import ToolOutput as ToolOutput
    from ._protocol import ToolSpec as ToolSpec
    from ._protocol import Usage as Usage
    from ._run import Injection as Injection
    from ._run import RunGateway as RunGateway
    from ._run import Runner as Runner
    from ._run import StopCondition as StopCondition
    from ._run import WriteArtifact as WriteArtifact
    from ._run import run_team as run_team
    from ._summary import RunSummary as RunSummary
    from ._summary import decode_summary as decode_summary
    from ._summary import encode_summary as encode_summary
    from ._summary import read_summary as read_summary
    from ._summary import sealed_summary as sealed_summary
    from ._util import EVENTS as EVENTS
    from ._util import MASK as MASK
    from ._util import SANDBOX_SCRATCH as SANDBOX_SCRATCH
    from ._util import SCENARIO as SCENARIO
    from ._util import SUMMARY as SUMMARY
    from ._util import JsonlWriter as JsonlWriter
    from ._util import Redactor as Redactor
    from ._util import arm as arm
    from ._util import closest as closest
    from ._util import did_you_mean as did_you_mean
    from ._util import encode_json as encode_json
    from ._util import lazy_exports as lazy_exports
    from ._util import reached as reached
    from ._util import read_jsonl as read_jsonl
    from ._util import read_user_text as read_user_text
    from ._util import read_user_toml as read_user_toml
    from ._util import redact_url as redact_url
    from ._util import try_lock as try_lock
    from ._util import url_secrets as url_secrets
    from ._util import wrap_text as wrap_text
    from ._verdict import Judge as Judge
    from ._verdict import RunRecord as RunRecord
    from ._verdict import Verdict as Verdict
    from .llm import HUMAN_MODEL as HUMAN_MODEL
    from .llm import Gateway as Gateway
    from .llm import GatewayStats as GatewayStats
    from .llm import OpenAIProvider as OpenAIProvider
    from .llm import RecordingProvider as RecordingProvider
    from .llm import ReplayProvider as ReplayProvider
    from .llm import SimProvider as SimProvider
    from .llm import load_fixtures as load_fixtures
    from .llm import openai_settings_from_env as openai_settings_from_env
    from .llm import request_key as request_key
    from .money import Budget as Budget
    from .money import LedgerLine as LedgerLine
    from .money import Price as Price
    from .money import PriceBook as PriceBook
    from .money import cost_report as cost_report
    from .money import ledger_csv as ledger_csv
    from .money import load_ledger as load_ledger
    from .money import render_table as render_table
    from .money import report_json as report_json
    from .money import reprice as reprice
    from .money import without_wall_clock as without_wall_clock
    from .sandbox import SandboxLimits as SandboxLimits
    from .sandbox import SandboxResult as SandboxResult
    from .sandbox import SandboxSettings as SandboxSettings
    from .sandbox import run_sandboxed as run_sandboxed
    from .scenario import InjectSpec as InjectSpec
    from .scenario import LLMConfig as LLMConfig
    from .scenario import LLMOverrides as LLMOverrides
    from .scenario import RoleSpec as RoleSpec
    from .scenario import Scenario as Scenario
    from .scenario import ScenarioDoc as ScenarioDoc
    from .scenario import TypeSpecError as TypeSpecError
    from .scenario import load_scenario as load_scenario
    from .scenario import parse_type_spec as parse_type_spec
    from .scenario import scenario_to_builtins as scenario_to_builtins
    from .scenario import scenario_warnings as scenario_warnings
    from .scenario import scenario_with_overrides as scenario_with_overrides
    from .store import ReceiptError as ReceiptError
    from .store import RunStore as RunStore
    from .store import issue_receipt as issue_receipt
    from .store import new_run_id as new_run_id
    from .store import require_receipt as require_receipt
    from .store import verify_run as verify_run

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
    "ToolServerSetupError": "._errors",
    "JsonlWriter": "._util",
    "read_jsonl": "._util",
    "read_user_text": "._util",
    "read_user_toml": "._util",
    "Answers": "._protocol",
    "ChatMessage": "._protocol",
    "Completion": "._protocol",
    "LLMRequest": "._protocol",
    "Provider": "._protocol",
    "ProviderBase": "._protocol",
    "Usage": "._protocol",
    "ToolSpec": "._protocol",
    "DEFAULT_MAX_TOKENS": "._protocol",
    "ToolCall": "._protocol",
    "ToolOutput": "._protocol",
    "Crowd": "._member",
    "Member": "._member",
    "Turn": "._member",
    "Message": "._message",
    "SandboxSettings": ".sandbox",
    "SandboxLimits": ".sandbox",
    "SandboxResult": ".sandbox",
    "run_sandboxed": ".sandbox",
    "Environment": "._environment",
    "logical_view": "._events",
    "message_sequence": "._events",
    "decode_event": "._events",
    "read_events": "._events",
    "RunEnded": "._events",
    "RunStarted": "._events",
    "MESSAGE_KINDS": "._events",
    "Injection": "._run",
    "RunGateway": "._run",
    "Runner": "._run",
    "StopCondition": "._run",
    "WriteArtifact": "._run",
    "run_team": "._run",
    "Judge": "._verdict",
    "RunRecord": "._verdict",
    "Verdict": "._verdict",
    "RunSummary": "._summary",
    "read_summary": "._summary",
    "decode_summary": "._summary",
    "sealed_summary": "._summary",
    "encode_summary": "._summary",
    "RunStore": ".store",
    "new_run_id": ".store",
    "Budget": ".money",
    "cost_report": ".money",
    "ledger_csv": ".money",
    "load_ledger": ".money",
    "render_table": ".money",
    "report_json": ".money",
    "reprice": ".money",
    "Gateway": ".llm",
    "LedgerLine": ".money",
    "without_wall_clock": ".money",
    "OpenAIProvider": ".llm",
    "openai_settings_from_env": ".llm",
    "Price": ".money",
    "PriceBook": ".money",
    "RecordingProvider": ".llm",
    "ReplayProvider": ".llm",
    "request_key": ".llm",
    "HUMAN_MODEL": ".llm",
    "SimProvider": ".llm",
    "GatewayStats": ".llm",
    "load_fixtures": ".llm",
    "load_scenario": ".scenario",
    "scenario_to_builtins": ".scenario",
    "scenario_warnings": ".scenario",
    "scenario_with_overrides": ".scenario",
    "InjectSpec": ".scenario",
    "LLMOverrides": ".scenario",
    "LLMConfig": ".scenario",
    "RoleSpec": ".scenario",
    "Scenario": ".scenario",
    "ScenarioDoc": ".scenario",
    "ReceiptError": ".store",
    "issue_receipt": ".store",
    "require_receipt": ".store",
    "verify_run": ".store",
    "closest": "._util",
    "did_you_mean": "._util",
    "TypeSpecError": ".scenario",
    "parse_type_spec": ".scenario",
    "reached": "._util",
    "SANDBOX_SCRATCH": "._util",
    "SUMMARY": "._util",
    "redact_url": "._util",
    "MASK": "._util",
    "Redactor": "._util",
    "url_secrets": "._util",
    "wrap_text": "._util",
    "EVENTS": "._util",
    "lazy_exports": "._util",
    "arm": "._util",
    "encode_json": "._util",
    "SCENARIO": "._util",
    "try_lock": "._util",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
