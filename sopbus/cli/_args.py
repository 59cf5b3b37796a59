"""Argument types shared by the commands: each parses and checks one flag's value.

Each imports what it needs when it is called, not when the parser is built: ``decimal``
and ``pathlib`` are cheap, but ``sopbus --help`` pays for every module the parser imports.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decimal import Decimal
    from pathlib import Path


def provider_arg(text: str) -> str:
    """A provider the registry knows (``--provider``), or a user's ``module:Class``."""
    from sopbus.bus.scenario import provider_problem

    problem = provider_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem[0]}: {problem[1]}")
    return text


def path_arg(text: str) -> Path:
    """A file or directory argument, as a :class:`pathlib.Path`."""
    from pathlib import Path

    return Path(text)


def usd(text: str) -> Decimal:
    """An amount of USD greater than 0 (``--budget``), kept exact as a ``Decimal``."""
    from decimal import Decimal, InvalidOperation

    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(
            f"expected an amount of USD such as 3.0, got {text!r}"
        ) from None
    if not amount.is_finite() or amount <= 0:
        raise argparse.ArgumentTypeError(f"expected an amount of USD greater than 0, got {text!r}")
    from sopbus.bus.scenario import MAX_BUDGET_USD

    if amount > MAX_BUDGET_USD:
        raise argparse.ArgumentTypeError(
            f"expected at most ${MAX_BUDGET_USD:,}, the largest budget sopbus accepts, got {text!r}"
        )
    return amount


def whole_number(minimum: int, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse type: a whole number of ``minimum`` or more."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {minimum} or more, got {value}")
        return value

    return parse


positive_int = whole_number(1)  # --max-rounds


def seconds(text: str) -> float:
    """A time in seconds greater than 0 (``--lease``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, such as 10, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds greater than 0, got {text!r}")
    return value
