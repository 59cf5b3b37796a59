"""Token counts: exact ones for the simulator, upper bounds for budget reservations.

Counting uses the OpenAI BPE tables of ``bpe-openai`` (offline): the encoding of the model
when it is a known OpenAI model, ``o200k_base`` otherwise. Counts of message texts are
memoised per (encoding, text), because a run sends the same system prompts and history over
and over, and the gateway and the simulator count the same messages of one call.

The chat format adds a few tokens per message (OpenAI's cookbook: 3 per message and 3 that
prime the reply). :func:`prompt_upper_bound` adds more than that on purpose, plus the schema
when one is asked for (the API counts a ``json_schema`` response format as prompt, and
``prompt`` mode writes the schema into the system prompt). For a model whose tokenizer is
unknown it counts UTF-8 bytes instead of tokens: a byte-level BPE never makes more tokens
than bytes, so the bound holds whatever the server's tokenizer.
"""

from __future__ import annotations

from functools import lru_cache

import bpe_openai
import msgspec

from ._llm import LLMRequest

FALLBACK_ENCODING = "o200k_base"
# What the chat format adds: cookbook figures, used for the simulator's exact counts.
CHAT_TOKENS_PER_MESSAGE = 3
CHAT_REPLY_PRIMING = 3
# Margins of the reservation bound: a message's role and separators (known encodings), a
# foreign chat template's special tokens (unknown tokenizers), and the sentence that asks for
# the schema. tests/test_budget.py checks the provider's schema sentence fits SCHEMA_OVERHEAD.
BOUND_TOKENS_PER_MESSAGE = 8
BOUND_TOKENS_PER_MESSAGE_UNKNOWN = 16
SCHEMA_OVERHEAD = 64

_schema_json = msgspec.json.Encoder()


@lru_cache(maxsize=256)
def encoding_name(model: str) -> str | None:
    """The BPE encoding of an OpenAI ``model``, or ``None`` when the model is not known."""
    try:
        return str(bpe_openai.encoding_name_for_model(model))
    except (KeyError, ValueError, bpe_openai.UnsupportedModelError):
        return None


@lru_cache(maxsize=8)
def _encoding(name: str) -> bpe_openai.Encoding:
    return bpe_openai.get_encoding(name)


@lru_cache(maxsize=16384)
def _count(name: str, text: str) -> int:
    # encode_ordinary: a prompt that contains "<|endoftext|>" is text, not a special token.
    return len(_encoding(name).encode_ordinary(text))


def count_text(text: str, model: str) -> int:
    """Tokens of ``text`` in ``model``'s encoding (``o200k_base`` for unknown models)."""
    return _count(encoding_name(model) or FALLBACK_ENCODING, text)


def schema_text(request: LLMRequest) -> str:
    """The schema as written into a prompt (and counted): compact JSON, or ``""``."""
    return _schema_json.encode(request.schema).decode() if request.schema is not None else ""


def count_prompt(request: LLMRequest) -> int:
    """The prompt tokens a server would report for ``request``: messages in the chat format,
    plus the schema when one is asked for. What the simulator reports."""
    model = request.model
    total = CHAT_REPLY_PRIMING
    for message in request.messages:
        total += CHAT_TOKENS_PER_MESSAGE + count_text(message.role, model) + count_text(message.content, model)
    if request.schema is not None:
        total += count_text(schema_text(request), model)
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
        total += SCHEMA_OVERHEAD + (count_text(text, request.model) if known else len(text.encode("utf-8")))
    return total


def truncate_to_tokens(text: str, model: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` tokens, as a server cuts an answer at max_tokens."""
    encoding = _encoding(encoding_name(model) or FALLBACK_ENCODING)
    tokens = encoding.encode_ordinary(text)
    if len(tokens) <= limit:
        return text
    # A cut inside a multi-byte character leaves a partial character; drop it. Re-encoding a
    # cut can merge differently, so cut further until the result fits.
    while True:
        cut = encoding.decode_bytes(tokens[:limit]).decode("utf-8", errors="ignore")
        if limit <= 0 or len(encoding.encode_ordinary(cut)) <= limit:
            return cut if limit > 0 else ""
        limit -= 1
