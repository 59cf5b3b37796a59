"""sopbus's engine: messages, the Environment and its routing, the run loop, the run store,
the LLM gateway with its providers, prices, budget and cost ledger, and scenario loading.

``bus`` imports neither ``roles`` nor ``sops``; the CLI (``bus.cli``) is the one place
where everything is assembled.
"""

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
from ._environment import Environment as Environment
from ._environment import Inbox as Inbox
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
from ._sim import Fixture as Fixture
from ._sim import SimProvider as SimProvider
from ._sim import load_fixtures as load_fixtures
