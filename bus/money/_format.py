"""Money and shares for people. One format everywhere a person reads an amount (the CLI's
tables and messages, the report, the log); the files (ledger, summary, JSON) keep exact
decimals.

- ``$0.00`` for nothing, cents from a dollar up (``$2.00``, ``$1,204.50``);
- below a dollar, three significant digits with at least two decimals, so that a simulated
  run's fractions of a cent still show: ``$0.10``, ``$0.0043``, ``$0.00064``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext

_DIGITS = 3


def money(amount: Decimal | float | int | str) -> str:
    """``amount`` (USD) as people read it: ``$0.00432``, ``$0.10``, ``$12.35``."""
    return f"{'-' if _value(amount) < 0 else ''}${_digits(abs(_value(amount)))}"


def usd(amount: Decimal | float | int | str) -> str:
    """:func:`money` without the dollar sign, for a column headed "USD"."""
    value = _value(amount)
    return f"{'-' if value < 0 else ''}{_digits(abs(value))}"


def share(part: Decimal | float | int | str, whole: Decimal | float | int | str) -> str:
    """``part`` as a percentage of ``whole``: ``16%``, ``1.6%``, ``0.032%``, ``0%``; ``"no cap"``
    when there is no whole to measure against."""
    whole_value = _value(whole)
    if whole_value <= 0:
        return "no cap"
    pct = _value(part) / whole_value * 100
    if pct == 0:
        return "0%"
    if abs(pct) >= 10:
        return f"{pct:.0f}%"
    if abs(pct) >= Decimal("0.1"):
        return f"{pct:.1f}%"
    return f"{_significant(pct, 2).normalize():f}%"


def _value(amount: Decimal | float | int | str) -> Decimal:
    try:
        return amount if isinstance(amount, Decimal) else Decimal(str(amount))
    except InvalidOperation:
        raise ValueError(f"{amount!r} is not an amount of money") from None


def _digits(amount: Decimal) -> str:
    if amount == 0 or not amount.is_finite():
        return "0.00" if amount == 0 else str(amount)
    with localcontext() as context:
        # Cents of a large amount need more digits than the default 28 (1e26 raised
        # InvalidOperation here, in the message that was to refuse it).
        context.prec = max(context.prec, amount.adjusted() + 4)
        return _rounded(amount)


def _rounded(amount: Decimal) -> str:
    if amount >= 1:
        return f"{amount.quantize(Decimal('0.01'), rounding=ROUND_HALF_EVEN):,.2f}"
    rounded = _significant(amount, _DIGITS)
    if rounded >= 1:
        return f"{rounded:.2f}"
    whole, _, decimals = f"{rounded:f}".partition(".")
    decimals = decimals.rstrip("0").ljust(2, "0")
    return f"{whole}.{decimals}"


def _significant(amount: Decimal, digits: int) -> Decimal:
    step = Decimal(1).scaleb(amount.adjusted() - digits + 1)
    return amount.quantize(step, rounding=ROUND_HALF_EVEN)
