"""Paid tools: a tool call with a price (``[mcp.NAME] price_per_call``) is reserved,
settled and ledgered as a model call is, on its own ledger line (provider ``tool``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import TypeVar

import trio

from .._protocol import LLMRequest
from .._util import reached
from ..money import LedgerLine, Outcome, money
from ._books import NO_USAGE, TOOL, TOOL_PROVIDER, Books, round_ms
from ._purse import Purse, held

T = TypeVar("T")


class ToolCall:
    """Which tool call is paid for: the tool's full name, who calls it and when."""

    __slots__ = ("action", "request", "role", "round", "tool")

    def __init__(self, *, tool: str, role: str, action: str, round: int):
        self.tool, self.role, self.action, self.round = tool, role, action, round
        self.request = LLMRequest(messages=(), model=tool, role=role, action=action)

    def refusal(self, price: Decimal, purse: Purse) -> str:
        budget = purse.budget
        return (
            f"the tool call {self.tool} of {self.role}'s {self.action} costs {money(price)}; "
            f"{money(budget.left)} left of the budget {money(budget.cap)}: "
            f"not called. Raise [run].budget_usd, or lower the tool's price_per_call"
        )


async def paid_tool(
    purse: Purse,
    books: Books,
    price: Decimal,
    run: Callable[[], Awaitable[T]],
    call: ToolCall,
    record: Callable[[T | None, LedgerLine, int], None],
) -> T:
    """See :meth:`sopbus.bus.Gateway.paid_tool`."""
    request = call.request
    money_held = await held(
        purse, books, request, call.round, 1, price, lambda: call.refusal(price, purse), **TOOL
    )
    journal_id = 0
    if books.journal is not None:
        journal_id = books.journal.reserved(
            request, round=call.round, attempt=1, amount=price, provider=TOOL_PROVIDER
        )
    start = trio.current_time()
    result: T | None = None
    try:
        reached("tool:reserved")  # its price held and journaled, the tool not yet called
        result = await run()
    finally:
        await purse.settle(money_held, price)
        outcome: Outcome = "ok" if result is not None else "error"
        latency = round_ms(trio.current_time() - start)
        line = books.line(request, call.round, 1, outcome, NO_USAGE, price, latency, **TOOL)
        record(result, line, journal_id)
        # An answered call is closed by its record; a failed one by the journal's release.
        books.book(line, request, journal_id if result is None else 0, None)
    return result
