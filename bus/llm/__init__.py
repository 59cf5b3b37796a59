"""The LLM gateway and its providers.

Every call of a run goes through the :class:`Gateway` (reserve, call, settle, ledger).
Providers speak :class:`sopbus.bus.Provider`: ``sim`` (deterministic, with fixture files),
``openai`` (the official SDK), ``replay`` and recording cassettes, and the run's own
recording (``calls.jsonl``, the tape) that resume, replay and fork answer from.
Each provider is one module that registers itself (:func:`register_provider`); the
registry is read by the scenario schema, the command line, the assembly and sweeps.
Token counting lives here too. Uses :mod:`sopbus.bus.money` for prices and the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util import lazy_exports

if TYPE_CHECKING:
    from .._protocol import Completer as Completer
    from .._protocol import LiveFeed as LiveFeed
    from .._protocol import Person as Person
    from .._protocol import PromptCounter as PromptCounter
    from .._protocol import ProviderBase as ProviderBase
    from .._protocol import as_provider as as_provider
    from ..scenario import ProviderSpec as ProviderSpec
    from ..scenario import provider_for as provider_for
    from ..scenario import provider_names as provider_names
    from ..scenario import register_provider as register_provider
    from ._a2a import open_a2a_agents as open_a2a_agents
    from ._books import TOOL_PROVIDER as TOOL_PROVIDER
    from ._books import CallJournal as CallJournal
    from ._books import round_ms as round_ms
    from ._fixtures import Fixture as Fixture
    from ._fixtures import idea_warnings as idea_warnings
    from ._fixtures import load_fixtures as load_fixtures
    from ._gateway import Gateway as Gateway
    from ._human import HUMAN_MODEL as HUMAN_MODEL
    from ._human import HumanProvider as HumanProvider
    from ._human import HumanRouter as HumanRouter
    from ._human import answers_for as answers_for
    from ._live import LiveText as LiveText
    from ._mcp import open_mcp_servers as open_mcp_servers
    from ._mcp_launch import launch as launch
    from ._openai import DEFAULT_BASE_URL as DEFAULT_BASE_URL
    from ._openai import OpenAIProvider as OpenAIProvider
    from ._openai import OpenAISettings as OpenAISettings
    from ._openai import openai_settings_from_env as openai_settings_from_env
    from ._opened import opened as opened
    from ._recording import ToolRecord as ToolRecord
    from ._replay import CassetteLine as CassetteLine
    from ._replay import RecordingProvider as RecordingProvider
    from ._replay import ReplayProvider as ReplayProvider
    from ._replay import request_key as request_key
    from ._request import SCHEMA_INSTRUCTION as SCHEMA_INSTRUCTION
    from ._request import request_params as request_params
    from ._request import response_format as response_format
    from ._request import strict_schema as strict_schema
    from ._request import with_schema_instruction as with_schema_instruction
    from ._sim import SimProvider as SimProvider
    from ._stats import GatewayStats as GatewayStats
    from ._tape import EVERY_ROUND as EVERY_ROUND
    from ._tape import RELEASED as RELEASED
    from ._tape import RESERVED as RESERVED
    from ._tape import CallLog as CallLog
    from ._tape import CallRecord as CallRecord
    from ._tape import Tape as Tape
    from ._tape import TapeGateway as TapeGateway
    from ._tape import read_calls as read_calls
    from ._tape import read_recording as read_recording
    from ._tokens import BOUND_TOKENS_PER_MESSAGE as BOUND_TOKENS_PER_MESSAGE
    from ._tokens import BOUND_TOKENS_PER_MESSAGE_UNKNOWN as BOUND_TOKENS_PER_MESSAGE_UNKNOWN
    from ._tokens import CHAT_REPLY_PRIMING as CHAT_REPLY_PRIMING
    from ._tokens import CHAT_TOKENS_PER_MESSAGE as CHAT_TOKENS_PER_MESSAGE
    from ._tokens import FALLBACK_ENCODING as FALLBACK_ENCODING
    from ._tokens import SCHEMA_OVERHEAD as SCHEMA_OVERHEAD
    from ._tokens import count_prompt as count_prompt
    from ._tokens import count_text as count_text
    from ._tokens import encoding_name as encoding_name
    from ._tokens import prompt_upper_bound as prompt_upper_bound
    from ._tokens import schema_text as schema_text
    from ._tokens import truncate_to_tokens as truncate_to_tokens
    from ._toolbox import ToolBox as ToolBox
    from ._toolbox import resolve as resolve
    from ._tools import DEFAULT_MAX_RESULT_CHARS as DEFAULT_MAX_RESULT_CHARS
    from ._tools import DEFAULT_MAX_TOOL_STEPS as DEFAULT_MAX_TOOL_STEPS
    from ._tools import SOURCE_PYTHON as SOURCE_PYTHON
    from ._tools import TOOL_CHOICES as TOOL_CHOICES
    from ._tools import ToolChoice as ToolChoice
    from ._tools import ToolOutput as ToolOutput
    from ._tools import ToolSource as ToolSource
    from ._tools import ToolSpec as ToolSpec

_WHERE: dict[str, str] = {
    "Fixture": "._fixtures",
    "load_fixtures": "._fixtures",
    "idea_warnings": "._fixtures",
    "CallJournal": "._books",
    "HUMAN_MODEL": "._human",
    "HumanProvider": "._human",
    "HumanRouter": "._human",
    "answers_for": "._human",
    "Gateway": "._gateway",
    "round_ms": "._books",
    "TOOL_PROVIDER": "._books",
    "DEFAULT_BASE_URL": "._openai",
    "SCHEMA_INSTRUCTION": "._request",
    "OpenAISettings": "._openai",
    "openai_settings_from_env": "._openai",
    "OpenAIProvider": "._openai",
    "request_params": "._request",
    "with_schema_instruction": "._request",
    "response_format": "._request",
    "strict_schema": "._request",
    "CassetteLine": "._replay",
    "request_key": "._replay",
    "ReplayProvider": "._replay",
    "RecordingProvider": "._replay",
    "SimProvider": "._sim",
    "GatewayStats": "._stats",
    "RESERVED": "._tape",
    "RELEASED": "._tape",
    "EVERY_ROUND": "._tape",
    "CallRecord": "._tape",
    "CallLog": "._tape",
    "read_calls": "._tape",
    "Tape": "._tape",
    "TapeGateway": "._tape",
    "read_recording": "._tape",
    "FALLBACK_ENCODING": "._tokens",
    "CHAT_TOKENS_PER_MESSAGE": "._tokens",
    "CHAT_REPLY_PRIMING": "._tokens",
    "BOUND_TOKENS_PER_MESSAGE": "._tokens",
    "BOUND_TOKENS_PER_MESSAGE_UNKNOWN": "._tokens",
    "SCHEMA_OVERHEAD": "._tokens",
    "encoding_name": "._tokens",
    "count_text": "._tokens",
    "schema_text": "._tokens",
    "count_prompt": "._tokens",
    "prompt_upper_bound": "._tokens",
    "truncate_to_tokens": "._tokens",
    "Completer": ".._protocol",
    "LiveFeed": ".._protocol",
    "Person": ".._protocol",
    "PromptCounter": ".._protocol",
    "ProviderBase": ".._protocol",
    "as_provider": ".._protocol",
    "ProviderSpec": "..scenario",
    "provider_for": "..scenario",
    "provider_names": "..scenario",
    "register_provider": "..scenario",
    "ToolBox": "._toolbox",
    "resolve": "._toolbox",
    "LiveText": "._live",
    "opened": "._opened",
    "ToolRecord": "._recording",
    "DEFAULT_MAX_TOOL_STEPS": "._tools",
    "TOOL_CHOICES": "._tools",
    "ToolChoice": "._tools",
    "SOURCE_PYTHON": "._tools",
    "ToolSource": "._tools",
    "DEFAULT_MAX_RESULT_CHARS": "._tools",
    "ToolOutput": "._tools",
    "ToolSpec": "._tools",
    "open_a2a_agents": "._a2a",
    "open_mcp_servers": "._mcp",
    "launch": "._mcp_launch",
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
