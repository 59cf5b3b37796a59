"""``--price INPUT,OUTPUT[,CACHED_INPUT]``: a price for the run's model given on the command
line (or as ``price=`` to the Python API), checked as a ``[prices]`` entry is."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from .._errors import ConfigError
from ._types import PriceSpec

PRICE_FIX = (
    "expected INPUT,OUTPUT in USD per 1M tokens, e.g. --price 0.15,0.60 (0,0 for a local model)"
)


def price_spec(price: str | Sequence[Decimal | int | str]) -> PriceSpec:
    """``--price``'s value, ``"0.15,0.60"`` or ``(in, out[, cached_input])``, as a checked
    :class:`PriceSpec`; a wrong one raises ConfigError naming the flag and the fix."""
    parts = [p.strip() for p in price.split(",")] if isinstance(price, str) else list(price)
    shown = price if isinstance(price, str) else ",".join(str(p) for p in price)
    values: list[Decimal] = []
    for part in parts:
        try:
            value = Decimal(str(part))
        except InvalidOperation:
            raise ConfigError(f"--price {shown}: {PRICE_FIX}") from None
        if not value.is_finite():
            raise ConfigError(f"--price {shown}: {PRICE_FIX}")
        if value < 0:
            raise ConfigError(f"--price {shown}: a price cannot be negative; {PRICE_FIX}")
        values.append(value)
    if len(values) not in (2, 3):
        raise ConfigError(
            f"--price {shown}: {PRICE_FIX}; a third value, if given, is the cached input price"
        )
    return PriceSpec(
        input=values[0], output=values[1], cached_input=values[2] if len(values) == 3 else None
    )
