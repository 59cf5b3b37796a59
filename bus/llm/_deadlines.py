"""How long an ``openai`` call may take, and what its errors say when it took too long.

Two bounds, both from ``[llm]`` (or a role's or action's ``llm = {...}``):

* ``timeout_s`` bounds the whole call, from the request to the last byte, streamed or not;
* ``idle_timeout_s`` bounds the silence inside a streamed answer once its first piece came.
  The wait before the first piece (the server's queue, its reading of a long prompt) sends
  nothing, and on a CPU it can take minutes, so only ``timeout_s`` bounds it.

Each error names the bound that fired, after how long, and the key to raise. A timed-out
attempt is retryable and may have been billed: the gateway retries it from scratch and
ledgers it at its reservation.
"""

from __future__ import annotations

import math

import trio

from .._errors import ProviderError

_HOW_TO_RAISE = "(or llm = {{ {key} = ... }} on the role or action)"


def timed_out(base_url: str, timeout_s: float, *, stream: bool) -> ProviderError:
    """The whole-call bound fired."""
    how = "streamed " if stream else ""
    return ProviderError(
        f"{base_url} timed out: no whole {how}answer within timeout_s = {timeout_s:g} s, the "
        f"bound on a whole call; raise [llm].timeout_s {_HOW_TO_RAISE.format(key='timeout_s')} "
        f"for a server this slow",
        retryable=True,
        maybe_billed=True,
    )


def went_silent(base_url: str, idle_s: float, elapsed_s: float, chars: int) -> ProviderError:
    """The idle bound of a stream fired, ``elapsed_s`` into the call."""
    return ProviderError(
        f"{base_url} went silent in the middle of a streamed answer: nothing for "
        f"idle_timeout_s = {idle_s:g} s, {elapsed_s:.1f} s into the call ({chars} characters "
        f"of answer by then); raise [llm].idle_timeout_s "
        f"{_HOW_TO_RAISE.format(key='idle_timeout_s')} if the server is slow but alive",
        retryable=True,
        maybe_billed=True,
    )


class IdleBound:
    """A cancel scope around the reading of a stream whose deadline moves ``idle_s``
    ahead with each piece that arrives; no deadline until the first piece."""

    def __init__(self, idle_s: float):
        self.idle_s = idle_s
        self.scope = trio.CancelScope(deadline=math.inf)

    def heard(self) -> None:
        """A piece arrived: the server is alive for another ``idle_s``."""
        self.scope.deadline = trio.current_time() + self.idle_s

    @property
    def fired(self) -> bool:
        return self.scope.cancelled_caught


def refuses_stream(status: int, said: str) -> bool:
    """Whether an error answer to a streamed request says the server cannot stream (a 400
    or 422 whose message names ``stream``), so the same request without it may work."""
    return status in (400, 422) and "stream" in said.lower()
