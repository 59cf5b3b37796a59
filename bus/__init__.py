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
