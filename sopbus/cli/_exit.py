"""The exit codes of ``sopbus``, in one place, so that scripts can rely on them."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """What a ``sopbus`` process returns to its shell."""

    #: The run completed: idle, a stop condition, or the round limit.
    COMPLETED = 0
    #: The run failed (an action failed for good, a provider gave up).
    FAILED = 1
    #: A usage or configuration error: a bad flag or scenario file. Nothing was run.
    USAGE = 2
    #: The run stopped because the next call would have passed the budget cap.
    BUDGET_EXHAUSTED = 3
    #: The run completed, but its SOP's verdict failed (QA's tests failed, the gate did not
    #: pass, the chat hit a limit before its done token): see ``verdict`` in summary.json.
    VERDICT_FAILED = 4
    #: ``sopbus diff``: the two runs' messages differ (the first difference is printed). Not
    #: 1, which says a run failed: a script can tell "they differ" from "diff could not run".
    DIFFERENT = 5
    #: Interrupted with Ctrl-C (128 + SIGINT, as shells report it).
    INTERRUPTED = 130
