"""What the gateway says: why a call was refused, a failed attempt's reason in one line,
and the log line of each ledger line (MetaGPT's cost line, or a warning)."""

from __future__ import annotations

from decimal import Decimal

import trio
from loguru import logger

from .._protocol import LLMRequest
from ..money import Budget, LedgerLine, Price, money

_ERROR_CHARS = 300  # of a failed attempt's reason on its ledger line


def refusal(
    request: LLMRequest, price: Price, prompt_bound: int, worst: Decimal, budget: Budget
) -> str:
    """Why a call was refused: its worst case, where that comes from, what is left, and the
    two ways out (a bigger budget, or a smaller ``max_tokens``, which is most of a worst
    case when the prompt is short)."""
    completion = request.max_tokens * price.output / Decimal(1_000_000)
    return (
        f"{request.role} {request.action} on {request.model} was not sent: its worst case is "
        f"{money(worst)} (a prompt of up to {prompt_bound} tokens plus max_tokens = "
        f"{request.max_tokens} of completion, {money(completion)} of it), and {money(budget.left)} "
        f"is left of {money(budget.cap)} ({money(budget.spent)} spent, {money(budget.reserved)} held "
        f"by calls in flight); raise [run].budget_usd or --budget, or lower max_tokens "
        f"([llm].max_tokens, or llm = {{ max_tokens = ... }} on the action or role): a call "
        f"usually costs far less than its worst case"
    )


def first_line(exc: BaseException) -> str:
    """Why an attempt failed, in one bounded line for its ledger line and event."""
    if isinstance(exc, trio.Cancelled):
        return "cancelled"
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= _ERROR_CHARS else line[: _ERROR_CHARS - 3] + "..."


def log_line(line: LedgerLine) -> None:
    """MetaGPT's cost line for an answered call, naming who spent it; a failed or overrun
    attempt gets a warning that cannot be read as one (a refusal is not a call:
    BudgetExhausted tells the run). Amounts in :func:`money`'s digits, so a simulated
    call's fraction of a cent shows."""
    if line.outcome in ("ok", "replayed", "lost"):
        # Bound as a cost line: the run's log keeps every one, the terminal shows them only
        # with -v (they would wrap under the live view).
        logger.bind(cost=True).info(
            "Total running cost: {} | Max budget: {} | Current cost: {} by {}, "
            "prompt_tokens: {}, completion_tokens: {}",
            money(line.total_usd),
            money(line.budget_usd),
            money(line.cost_usd),
            who(line),
            line.prompt_tokens,
            line.completion_tokens,
        )
        if line.corrected:
            logger.warning(
                "Usage not believed: {} on {}: {}; booked at sopbus's own count, {}",
                who(line),
                line.model,
                line.corrected,
                money(line.cost_usd),
            )
    elif line.outcome != "refused":
        counted = (
            f"counted at its reservation {money(line.cost_usd)} (estimated: the provider may "
            f"have billed it)"
            if line.estimated
            else f"counted at {money(line.cost_usd)}"
        )
        status = f"HTTP {line.status}: " if line.status is not None else ""
        what = "Provider overrun" if line.outcome == "overrun" else "LLM call failed"
        logger.warning(
            "{}: {} on {}, attempt {}: {}{}; {}; {} of {} spent",
            what,
            who(line),
            line.model,
            line.attempt,
            status,
            line.error,
            counted,
            money(line.total_usd),
            money(line.budget_usd),
        )


def who(line: LedgerLine) -> str:
    """Who spent a line's money and on what: ``QaEngineer WriteTest (tests/test_game.py)``."""
    return f"{line.role} {line.what}" if line.role else line.what
