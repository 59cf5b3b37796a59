"""Token counts: exact ones for the simulator, upper bounds for budget reservations.

Counting uses the OpenAI BPE tables compiled into ``bpe-openai``'s Rust extension
(offline): the encoding of the model when it is a known OpenAI model, ``o200k_base``
otherwise. The extension is loaded on its own, without the package's Python wrapper: the
wrapper parses every table in Python when it is imported (1 to 2 s at each ``sopbus run``),
while the extension has them built in (about 0.1 s for the first tokenizer). Counts of message texts are
memoised per (encoding, text), because a run sends the same system prompts and history over
and over, and the gateway and the simulator count the same messages of one call.

The chat format adds a few tokens per message (OpenAI's cookbook: 3 per message and 3 that
prime the reply). :func:`prompt_upper_bound` adds more than that on purpose, plus the schema
when one is asked for (the API counts a ``json_schema`` response format as prompt, and
``prompt`` mode writes the schema into the system prompt). For a model whose tokenizer is
unknown it counts UTF-8 bytes instead of tokens: a byte-level BPE never makes more tokens
than bytes, so the bound holds whatever the server's tokenizer.

Tools count as prompt too: each offered tool's name, description and parameter schema
(with :data:`TOOL_OVERHEAD` for the API's wrapping), each call an assistant turn asked for
(its id, name and arguments) and each tool turn's call id. A tool loop's request grows with
every step, and each step is reserved at the bound of the prompt as it has grown.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

from .._protocol import ChatMessage, LLMRequest

FALLBACK_ENCODING = "o200k_base"
# What the chat format adds: cookbook figures, used for the simulator's exact counts.
CHAT_TOKENS_PER_MESSAGE = 3
CHAT_REPLY_PRIMING = 3
# Margins of the reservation bound: a message's role and separators (known encodings), a
# foreign chat template's special tokens (unknown tokenizers), and the sentence that asks for
# the schema. tests/money/test_budget.py checks the provider's schema sentence fits SCHEMA_OVERHEAD.
BOUND_TOKENS_PER_MESSAGE = 8
BOUND_TOKENS_PER_MESSAGE_UNKNOWN = 16
SCHEMA_OVERHEAD = 64
TOOL_OVERHEAD = 32  # per tool offered and per call asked for: the API's JSON around them

_schema_json = msgspec.json.Encoder()


# Which encoding an OpenAI model uses, by name prefix (the public mapping tiktoken ships);
# the longest matching prefix wins. Snapshots ("gpt-4o-2024-08-06") share their family's.
_ENCODING_BY_PREFIX = {
    "gpt-4o": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4.5": "o200k_base",
    "gpt-5": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4": "o200k_base",
    "chatgpt-4o": "o200k_base",
    "gpt-oss": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35": "cl100k_base",
    "text-embedding-3": "cl100k_base",
    "text-embedding-ada-002": "cl100k_base",
}


@lru_cache(maxsize=256)
def encoding_name(model: str) -> str | None:
    """The BPE encoding of an OpenAI ``model``, or ``None`` when the model is not known."""
    prefixes = [
        p for p in _ENCODING_BY_PREFIX if model == p or model.startswith((p + "-", p + "."))
    ]
    return _ENCODING_BY_PREFIX[max(prefixes, key=len)] if prefixes else None


def _extension() -> ModuleType:
    """bpe-openai's compiled tokenizer module, loaded without the package's ``__init__``."""
    spec = importlib.util.find_spec("bpe_openai")
    locations = list(spec.submodule_search_locations or ()) if spec else []
    for directory in locations:
        for path in sorted(Path(directory).glob("_bindings*")):
            if path.suffix in (".so", ".pyd"):
                name = "bpe_openai._bindings"
                loader = importlib.machinery.ExtensionFileLoader(name, str(path))
                module = importlib.util.module_from_spec(
                    importlib.util.spec_from_file_location(name, path, loader=loader)  # type: ignore[arg-type]
                )
                loader.exec_module(module)
                return module
    return importlib.import_module("bpe_openai._bindings")  # the slow way, but it works


@lru_cache(maxsize=8)
def _tokenizer(name: str) -> Any:
    return _extension().tokenizer_for_encoding(name)


@lru_cache(maxsize=16384)
def _count(name: str, text: str) -> int:
    # The extension counts "<|endoftext|>" in a prompt as text, not as a special token.
    return int(_tokenizer(name).count(text))


def count_text(text: str, model: str) -> int:
    """Tokens of ``text`` in ``model``'s encoding (``o200k_base`` for unknown models)."""
    name = encoding_name(model) or FALLBACK_ENCODING
    if len(text) >= _SHORT:
        return _count(name, text)
    # Short texts that differ per agent (a name, a persona) would push the long ones out of
    # the cache above; they are kept a moment in a plain dict instead, long enough for the
    # gateway's bound and the simulator's count of one batch to count each once.
    short = _short.setdefault(name, {})
    found = short.get(text)
    if found is None:
        if len(short) >= _SHORT_KEPT:
            short.clear()
        found = short[text] = int(_tokenizer(name).count(text))
    return found


_SHORT = 160
_SHORT_KEPT = 8192
_short: dict[str, dict[str, int]] = {}  # encoding -> short text -> its count


def schema_text(request: LLMRequest) -> str:
    """The schema as written into a prompt (and counted): compact JSON, or ``""``."""
    return _schema_json.encode(request.schema).decode() if request.schema is not None else ""


def tool_texts(request: LLMRequest) -> list[str]:
    """The tool texts of ``request`` that reach the model, besides the messages' contents:
    each offered tool (name, description, schema) and each tool call or call id of its
    messages."""
    texts = [_schema_json.encode(spec).decode() for spec in request.tools]
    for message in request.messages:
        texts.extend(_message_tool_texts(message))
    return texts


def _message_tool_texts(message: ChatMessage) -> list[str]:
    texts = [f"{call.id} {call.name} {call.arguments}" for call in message.tool_calls]
    if message.tool_call_id is not None:
        texts.append(message.tool_call_id)
    return texts


def _tool_items(request: LLMRequest) -> int:
    return len(request.tools) + sum(len(m.tool_calls) for m in request.messages)


def count_prompt(request: LLMRequest) -> int:
    """The prompt tokens a server would report for ``request``: messages in the chat format,
    plus the schema when one is asked for, plus the tools. What the simulator reports."""
    model = request.model
    total = CHAT_REPLY_PRIMING
    for message in request.messages:
        total += (
            CHAT_TOKENS_PER_MESSAGE
            + count_text(message.role, model)
            + count_text(message.content, model)
        )
    if request.schema is not None:
        total += count_text(schema_text(request), model)
    for text in tool_texts(request):
        total += count_text(text, model)
    return total


def prompt_upper_bound(request: LLMRequest) -> int:
    """At least as many prompt tokens as any server will bill for ``request``; see the module
    docstring for why it holds."""
    known = encoding_name(request.model) is not None
    total = CHAT_REPLY_PRIMING
    if known:
        for message in request.messages:
            total += BOUND_TOKENS_PER_MESSAGE + count_text(message.content, request.model)
    else:
        for message in request.messages:
            total += BOUND_TOKENS_PER_MESSAGE_UNKNOWN + len(message.content.encode("utf-8"))
    if request.schema is not None:
        text = schema_text(request)
        total += SCHEMA_OVERHEAD + (
            count_text(text, request.model) if known else len(text.encode("utf-8"))
        )
    total += TOOL_OVERHEAD * _tool_items(request)
    for text in tool_texts(request):
        total += count_text(text, request.model) if known else len(text.encode("utf-8"))
    return total


def truncate_to_tokens(text: str, model: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` tokens, as a server cuts an answer at max_tokens."""
    tokenizer = _tokenizer(encoding_name(model) or FALLBACK_ENCODING)
    tokens = tokenizer.encode(text)
    if len(tokens) <= limit:
        return text
    # A cut inside a multi-byte character cannot be decoded; cut a token earlier. Re-encoding
    # a cut can merge differently, so cut further until the result fits.
    while limit > 0:
        try:
            cut = str(tokenizer.decode(tokens[:limit]))
        except ValueError:
            limit -= 1
            continue
        if tokenizer.count(cut) <= limit:
            return cut
        limit -= 1
    return ""
