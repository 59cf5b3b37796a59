"""Answers of the suite's model servers that fit an action's output schema.

:func:`anthropic_answer` scripts :class:`~support.anthropic_server.AnthropicServer` and
:func:`openai_answer` :class:`~support.openai_server.OpenAIServer`: each answers a call with
what the simulator would write for the request's schema, seeded by the request, and reports
usage as a server does, so a shipped scenario run against them ends as against a real
server, with the same counts each time (tests/e2e/test_anthropic_run.py; the docs pages
whose commands call a model, in tests/e2e/test_docs_commands.py).
"""

from __future__ import annotations

import json
import random
from typing import Any

from sopbus.bus import ChatMessage, LLMRequest
from sopbus.bus.llm import count_text
from sopbus.bus.llm._sim import _generate

from .anthropic_server import Reply
from .openai_server import Answer


def _fitting(said: list[str], model: str, schema: dict[str, Any], max_tokens: int) -> str:
    """What the simulator writes for ``schema``, seeded by the request, so it is repeatable."""
    request = LLMRequest(
        messages=(ChatMessage("user", "\n".join(said)),),
        model=model,
        schema=schema,
        max_tokens=max_tokens,
    )
    return _generate(request, random.Random(len(said[-1])))


def anthropic_answer(body: dict[str, Any]) -> Reply:
    """The action's answer through the answer tool; the cache counts are the server's own
    (support.anthropic_server.PromptCache)."""
    (tool,) = [t for t in body.get("tools", []) if t["name"] == "answer"]
    said = [b["text"] for m in body["messages"] for b in m["content"] if b.get("type") == "text"]
    text = _fitting(said, body["model"], tool["input_schema"], body["max_tokens"])
    return Reply(
        "",
        tool_uses=(("toolu_1", "answer", json.loads(text)),),
        output_tokens=count_text(text, body["model"]),
        cache=True,
    )


def openai_answer(body: dict[str, Any]) -> Answer:
    """A chat completion that fits the request's ``response_format`` schema, with the usage
    counted as the simulator counts it (a server counts its own tokens; these are fixed)."""
    said = [str(m.get("content") or "") for m in body["messages"]]
    schema = body["response_format"]["json_schema"]["schema"]
    limit = body.get("max_completion_tokens") or body.get("max_tokens") or 1024
    text = _fitting(said, body["model"], schema, limit)
    return Answer(
        text,
        prompt_tokens=sum(count_text(s, body["model"]) for s in said),
        completion_tokens=count_text(text, body["model"]),
    )
