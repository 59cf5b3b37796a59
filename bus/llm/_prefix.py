"""How much of a run's prompts a prefix cache could serve: the tokens each request shares,
from its start, with some earlier request (OpenAI's, DeepSeek's and Anthropic's prompt
caches and llama.cpp's slots skip or discount exactly such a prefix).

A request is read as one token sequence in the chat format: per message a start mark, the
role's tokens, a separator, the content's tokens and an end mark (the three tokens a message
adds in :func:`~sopbus.bus.llm._tokens.count_prompt`), then the three that prime the reply.
Marks are negative numbers, so no text can stand for one. The schema is left out: a server
sends it as a grammar or a tool list, not in the prompt's prefix.

The earlier sequences are kept sorted: the longest common prefix of a new sequence with any
of them is the one with a neighbour of its place in that order, so one request costs a
binary search and two comparisons, not one per earlier request.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from .._protocol import LLMRequest
from ._tokens import FALLBACK_ENCODING, _tokenizer, encoding_name

_START, _SEP, _END = -1, -2, -3
_REPLY = (_START, -4, _SEP)


def chat_tokens(request: LLMRequest) -> tuple[int, ...]:
    """``request``'s messages as the one token sequence a server's prompt cache sees."""
    tokenizer = _tokenizer(encoding_name(request.model) or FALLBACK_ENCODING)
    out: list[int] = []
    for message in request.messages:
        out.append(_START)
        out.extend(tokenizer.encode(message.role))
        out.append(_SEP)
        out.extend(tokenizer.encode(message.content))
        out.append(_END)
    out.extend(_REPLY)
    return tuple(out)


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # bisect on "the first k tokens are equal", slices compare in C
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixTally:
    """The requests of one run in order, and the tokens each shares with an earlier one.

    ``share`` is the most of the run's prompt tokens any prefix cache could serve: the sum
    over requests of the longest common prefix with any earlier request, divided by the sum
    of the requests' tokens. The first request of a run shares nothing.
    """

    __slots__ = ("_seen", "shared", "total")

    def __init__(self, requests: Iterable[LLMRequest] = ()) -> None:
        self._seen: list[tuple[int, ...]] = []
        self.shared = 0
        self.total = 0
        for request in requests:
            self.add(request)

    def add(self, request: LLMRequest) -> int:
        """Counts ``request``; returns the tokens it shares with an earlier request."""
        tokens = chat_tokens(request)
        at = bisect.bisect_left(self._seen, tokens)
        best = max(
            (
                common_prefix(tokens, self._seen[i])
                for i in (at - 1, at)
                if 0 <= i < len(self._seen)
            ),
            default=0,
        )
        self._seen.insert(at, tokens)
        self.shared += best
        self.total += len(tokens)
        return best

    @property
    def share(self) -> float:
        return self.shared / self.total if self.total else 0.0
