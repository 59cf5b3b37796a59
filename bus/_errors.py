"""The exceptions of sopbus, one flat family under :class:`SopbusError`.

A *user's* mistake (a scenario file that is wrong, an unknown model price) is a
:class:`ConfigError`: the CLI prints it without a traceback and exits 2. A run that hits
its cap raises :class:`BudgetExhausted`, which ends the run with ``budget_exhausted``
rather than ``error``. A model that answers badly raises :class:`ModelOutputError`, which
an action retries with feedback. A provider that fails (HTTP 5xx, timeouts) raises
:class:`ProviderError`. Anything else is a bug in our code and is raised as it is.
"""

from __future__ import annotations


class SopbusError(Exception):
    """Base class of every error sopbus raises on purpose."""


class ConfigError(SopbusError):
    """The user's configuration is wrong: a scenario file, a flag, a price, a name.

    The message names the file, the place (``$.roles[0].watch[1]``), what was expected and
    the fix. The CLI prints it as it is and exits with code 2.
    """


class BudgetExhausted(SopbusError):
    """A call's worst-case cost does not fit under the run's budget cap.

    Raised *before* the call is made, so nothing was spent on it. The run loop ends the run
    with end reason ``budget_exhausted``.
    """


class ModelOutputError(SopbusError):
    """The model's answer does not fit the action's output schema (after all repairs)."""


class ProviderError(SopbusError):
    """An LLM provider failed: transport error, HTTP error status, timeout.

    ``retryable`` says whether the same request may succeed later (429, 5xx, timeouts);
    ``retry_after`` is the server's hint in seconds, when it gave one.
    """

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class StopRun(SopbusError):
    """Raised by a role to end the run on purpose (a termination token, a gate verdict).

    The run ends with end reason ``stop_condition`` and ``detail`` as its explanation.
    """

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail
