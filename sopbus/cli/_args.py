"""Argument types shared by the commands.

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


def add_output_args(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``-v``: what a command that runs a scenario prints while it runs;
    ``--seal-key-file``: the key of its keyed seal."""
    parser.add_argument(
        "--quiet", action="store_true", help="no progress display; only the summary"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the cost line of every LLM call (always in run.log)",
    )
    parser.add_argument(
        "--seal-key-file",
        metavar="FILE",
        type=path_arg,
        help="seal the run with the key in FILE (an HMAC that `sopbus verify --key-file` "
        "checks; the key is never written to the run; default: $SOPBUS_SEAL_KEY)",
    )


def add_model_args(parser: argparse.ArgumentParser, *, model: bool = True) -> None:
    """``--provider``, ``--model``, ``--base-url`` (``model=False`` leaves them out: a sweep
    sets them with ``--set``) and ``--price``: the model a command runs or checks. Shared
    by ``run`` and ``validate``, so the model validate checks is the one run would call."""
    if model:
        from sopbus.bus.scenario import listed_providers

        parser.add_argument(
            "--provider",
            metavar="P",
            type=provider_arg,
            help=f"LLM provider: {', '.join(listed_providers())}, or module:Class for your "
            "own (overrides [llm].provider)",
        )
        parser.add_argument("--model", metavar="M", help="model name (overrides [llm].model)")
        parser.add_argument(
            "--base-url",
            metavar="URL",
            help="OpenAI-compatible endpoint (overrides [llm].base_url)",
        )
    parser.add_argument(
        "--price",
        metavar="IN,OUT",
        help="USD per 1M input,output tokens of the run's model"
        + (" (after --model)" if model else " (the scenario's [llm].model)")
        + ", e.g. 0.15,0.60 (0,0 for a local model; a third value prices cached input); "
        'wins over the file\'s [prices."MODEL"]',
    )


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
