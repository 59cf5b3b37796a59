"""``extra_body``: sampling settings a scenario passes through to an OpenAI-compatible server.

Small models loop inside JSON under a server's default sampling; ``repeat_penalty`` or
``top_k`` fix that, and only the server knows them, so sopbus sends the table as it is
(the openai SDK's ``extra_body=``). A key sopbus sets itself would be silently overwritten
on the wire or overwrite sopbus's own value, so such keys are refused here with the proper
place to set them.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from ._errors import PathToken, format_path

OWN_KEYS: dict[str, str] = {
    "model": "set [llm].model (or llm = { model = ... } on the role or action)",
    "messages": "sopbus writes the messages from the action's prompt",
    "temperature": "set [llm].temperature (or llm = { temperature = ... })",
    "max_tokens": "set [llm].max_tokens (or llm = { max_tokens = ... })",
    "max_completion_tokens": "set [llm].max_tokens (and [llm].max_tokens_param for its name)",
    "stream": "set [llm].stream (or llm = { stream = ... })",
    "stream_options": "set [llm].stream; sopbus asks for the usage itself",
    "response_format": 'set [llm].output_mode ("json_schema" or "prompt")',
    "tools": "sopbus does not send tools; actions ask for an output schema",
    "tool_choice": "sopbus does not send tools; actions ask for an output schema",
    "functions": "sopbus does not send tools; actions ask for an output schema",
    "function_call": "sopbus does not send tools; actions ask for an output schema",
    "seed": "[run].seed is the run's seed; a server-side seed is not part of a replay's key",
    "n": "sopbus reads one answer per call",
}
"""Request fields sopbus sets (or must not have set behind its back), with where they belong."""


def extra_body_problems(extra: dict[str, Any] | None, tokens: list[PathToken]) -> list[str]:
    """One problem per key of ``extra`` (at ``tokens``) that sopbus sets itself, and per value
    JSON cannot carry (a TOML date, ``nan``, ``inf``)."""
    out = [
        f"{key!r} is a field sopbus sets itself - at `{format_path([*tokens, key])}`: "
        f"remove it from extra_body; {OWN_KEYS[key]}"
        for key in (extra or {})
        if key in OWN_KEYS
    ]
    return out + _not_json(extra or {}, tokens)


def _not_json(value: Any, tokens: list[PathToken]) -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _not_json(v, [*tokens, k])]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _not_json(v, [*tokens, i])]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{value} is no JSON number - at `{format_path(tokens)}`: write a finite number"]
    if isinstance(value, dt.date | dt.time):
        return [
            f"a TOML date or time is no JSON value - at `{format_path(tokens)}`: "
            'write it as a string ("2026-01-31")'
        ]
    return []


def merged_extra(base: dict[str, Any] | None, over: dict[str, Any] | None) -> dict[str, Any] | None:
    """``over``'s keys laid on ``base``'s: a role's ``top_k`` replaces the scenario's and keeps
    its ``repeat_penalty``."""
    if not over:
        return base
    return {**(base or {}), **over}


def scenario_extra_problems(scenario: Any) -> list[str]:
    """The clashing ``extra_body`` keys of ``[llm]``, of each role's and each action's ``llm``."""
    out = extra_body_problems(scenario.llm.extra_body, ["llm", "extra_body"])
    for i, role in enumerate(scenario.roles):
        if role.llm is not None:
            out += extra_body_problems(role.llm.extra_body, ["roles", i, "llm", "extra_body"])
    for name, action in scenario.actions.items():
        if action.llm is not None:
            out += extra_body_problems(
                action.llm.extra_body, ["actions", name, "llm", "extra_body"]
            )
    return out
