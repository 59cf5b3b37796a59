"""Usage too small to be true, and what such a call is booked at instead.

:mod:`sopbus.bus.llm._overrun` catches usage that prices above the call's reservation. The
other lie is usage that prices below the truth: a server that reports
``prompt_tokens: 0``, no completion tokens for the text it sent, or more cached tokens than
the prompt has. Each call would be booked at (nearly) $0, and the cap would never stop a run
that spends without end. sopbus counted the request itself, and the text came back, so it
knows better:

* prompt tokens below half of sopbus's own count of the prompt (its messages; a
  ``json_schema`` response format is left out, as a server may enforce it by grammar and
  bill nothing for it), or below half of the server's own count where it gave one, are
  booked at the prompt part of the reservation (half leaves room for a tokenizer that is
  not the one sopbus counts with; every tokenizer in use stays well within it);
* completion tokens below half of sopbus's count of the text (zero, absent) are booked at
  that count, at most ``max_tokens``, so the booking stays within the reservation;
* cached tokens above the prompt cannot be true, so none are believed cached; nor can
  cache-write tokens above the prompt's uncached part, so none are believed written (they
  then bill at the input price, which the reservation covers as well).

Such a call is answered and the run goes on: its ledger line holds the booked counts, says
``estimated`` and, in ``corrected``, what the provider reported. Those lines price at what
the call really cost or more, so the cap holds against the server's own bill.
"""

from __future__ import annotations

import msgspec

from .._protocol import LLMRequest, Usage
from ._tokens import count_prompt, count_text, prompt_upper_bound


def plausible_usage(
    usage: Usage,
    request: LLMRequest,
    text: str,
    *,
    bound: int | None = None,
    counted: int | None = None,
) -> tuple[Usage, str | None]:
    """The usage to book for ``request`` answered with ``text``, and why it is not the
    reported ``usage`` (``None`` when it is): see the module docstring. ``usage`` has no
    negative count (that is an overrun, caught before). ``bound`` is the prompt part of the
    call's reservation (default: :func:`~sopbus.bus.llm._tokens.prompt_upper_bound`);
    ``counted`` the server's own count of the prompt, where it gave one (it knows its
    tokenizer, and whether a schema is prompt or grammar), instead of sopbus's count."""
    why: list[str] = []
    prompt, completion, cached = usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens
    who = "sopbus counts" if counted is None else "the server counted"
    counted = _least_prompt(request) if counted is None else counted
    if _far_below(prompt, counted):
        why.append(f"prompt_tokens={prompt} for a prompt {who} at {counted}")
        prompt = max(prompt, prompt_upper_bound(request) if bound is None else bound)
    if text:
        written = count_text(text, request.model)
        if _far_below(completion, written):
            why.append(f"completion_tokens={completion} for an answer of {written} tokens")
            completion = max(completion, min(written, request.max_tokens))
    if cached > usage.prompt_tokens:
        why.append(f"cached_tokens={cached} above prompt_tokens={usage.prompt_tokens}")
        cached = 0
    written = usage.cache_write_tokens
    if written > usage.prompt_tokens - cached:
        why.append(
            f"cache_write_tokens={written} above the {usage.prompt_tokens - cached} "
            f"prompt tokens not read from the cache"
        )
        written = 0
    if not why:
        return usage, None
    return Usage(prompt, completion, cached, written), "; ".join(why)


def _least_prompt(request: LLMRequest) -> int:
    """sopbus's count of the prompt every server bills: the messages, and the schema only
    where it is written into them (``output_mode = "prompt"``). A ``json_schema`` response
    format is prompt at OpenAI but a grammar at llama.cpp or Ollama, billed as nothing: with
    it counted, a whole prompt of a local model looked too small to be true (170 tokens
    billed, booked at 2,110)."""
    if request.schema is not None and request.output_mode == "json_schema":
        return count_prompt(msgspec.structs.replace(request, schema=None))
    return count_prompt(request)


def _far_below(reported: int, counted: int) -> bool:
    return reported * 2 < counted or (reported == 0 and counted > 0)
