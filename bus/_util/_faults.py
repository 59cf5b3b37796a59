"""Stepped fault points: where crash tests kill the process, at a named step, every time.

A crash test sets ``SOPBUS_KILL_AT=STEP`` (or ``STEP#N``: the N-th time the step is
reached) for a ``sopbus`` process; the command line's entry reads it once (:func:`arm`) and
:func:`reached` then sends the process SIGKILL at that step, as a ``kill -9`` landing there
would. A kill chosen by a step, not by a timer, lands in a window of any width (a rename,
an answer on the stream) on every run. Unarmed, as in every real run, a point costs one
comparison.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

VARIABLE = "SOPBUS_KILL_AT"

_armed: list[str | int] = []  # [step, times left]; empty when no test armed a point


def arm(environ: Mapping[str, str]) -> None:
    """Arms the point ``environ[SOPBUS_KILL_AT]`` names, if any (the CLI's entry only)."""
    spec = environ.get(VARIABLE, "")
    if not spec:
        return
    step, _, nth = spec.partition("#")
    _armed[:] = [step, int(nth) if nth else 1]


def reached(step: str) -> None:
    """Dies here by SIGKILL if a crash test armed ``step`` and this is its N-th time."""
    if not _armed or _armed[0] != step:
        return
    left = int(_armed[1]) - 1
    _armed[1] = left
    if left == 0:
        os.kill(os.getpid(), signal.SIGKILL)
