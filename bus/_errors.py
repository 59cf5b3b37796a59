"""The exceptions of sopbus, one flat family under :class:`SopbusError`.

A *user's* mistake (a scenario file that is wrong, an unknown model price) is a
:class:`ConfigError`: the CLI prints it without a traceback and exits 2. A run that hits
its cap raises :class:`BudgetExhausted`, which ends the run with ``budget_exhausted``
rather than ``error``. A model that answers badly raises :class:`ModelOutputError`, which
an action retries with feedback. A provider that fails (HTTP 5xx, timeouts) raises
:class:`ProviderError`; one that reports usage that cannot be true raises
:class:`ProviderOverrun`, which ends the run like the cap does. Anything else is a bug in our
code and is raised as it is.
"""

from __future__ import annotations

from collections.abc import Iterator


class SopbusError(Exception):
    """Base class of every error sopbus raises on purpose."""


class ConfigError(SopbusError):
    """The user's configuration is wrong: a scenario file, a flag, a price, a name.

    The message names the file, the place (``$.roles[0].watch[1]``), what was expected and
    the fix. The CLI prints it as it is and exits with code 2.
    """


class BudgetExhausted(SopbusError):
    """A call's worst-case cost does not fit under the run's budget cap.

    Raised *before* the call is made, so nothing was spent on it (except as its subclass
    :class:`ProviderOverrun`). The run loop ends the run with end reason ``budget_exhausted``.
    """


class ModelOutputError(SopbusError):
    """The model's answer does not fit the action's output schema (after all repairs)."""


class ToolServerError(SopbusError):
    """A tool source failed, not a tool: an MCP server did not start, crashed, timed out,
    or listed tools sopbus cannot use. The message names the server and what to check."""

    def __init__(self, server: str, message: str):
        super().__init__(f"tool server {server!r}: {message}")
        self.server = server
        self.detail = message


class ToolServerSetupError(ToolServerError, ConfigError):
    """A tool server that cannot be started as configured: its command is not found, its
    ``cwd`` is not a folder, a variable its ``env`` names is not set. Found before the run
    starts, so it is a configuration error (exit 2, nothing run) naming the server."""


class ProviderError(SopbusError):
    """An LLM provider failed: transport error, HTTP error status, timeout, an answer that is
    not a chat completion.

    ``retryable`` says whether the same request may succeed later (429, 5xx, timeouts);
    ``retry_after`` is the server's hint in seconds, when it gave one. ``status`` is the HTTP
    status (or the code of an error event inside a stream), ``None`` when there was none.
    ``maybe_billed`` says the server had begun to answer (or may have been generating) when
    the attempt failed, so the provider may bill it: the gateway then counts the attempt at
    its reservation, marked estimated, instead of $0.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
        maybe_billed: bool = False,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.maybe_billed = maybe_billed


class ProviderOverrun(ProviderError, BudgetExhausted):
    """The provider reported usage that cannot be true: a negative count, more completion
    tokens than ``max_tokens``, more prompt tokens than the prompt can hold.

    The reservation of such a call was no bound, so the cap can no longer be trusted: the
    call is ledgered at what the provider says it billed and the run ends at once. It is a
    :class:`BudgetExhausted` too, so the run loop ends the run with ``budget_exhausted``;
    ``overrun`` holds what the summary reports (``summary.json``'s ``overrun``).
    """

    def __init__(self, message: str, *, overrun: dict[str, object]):
        super().__init__(message, retryable=False)
        self.overrun = overrun


class StopRun(SopbusError):
    """Raised by a role to end the run on purpose (a termination token, a gate verdict).

    The run ends with end reason ``stop_condition`` and ``detail`` as its explanation.
    """

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


def exception_leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside ``exc``, through every nesting of exception groups (trio's
    nurseries wrap what their tasks raised); ``exc`` itself when it is not a group."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from exception_leaves(inner)
    else:
        yield exc
