"""One money format for people: cents from a dollar up, three significant digits below it,
and shares that show a small spend; the files keep exact decimals."""

from __future__ import annotations

from decimal import Decimal

import pytest

from sopbus.bus.money import money, share


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        ("0", "$0.00"),
        ("0.004320", "$0.00432"),
        ("0.00431985", "$0.00432"),
        ("0.1000", "$0.10"),
        ("2.0", "$2.00"),
        ("0.00064035", "$0.00064"),
        ("0.0005", "$0.0005"),
        ("0.9996", "$1.00"),
        ("1234.5", "$1,234.50"),
        ("0.000000001", "$0.000000001"),
        ("-0.5", "-$0.50"),
    ],
)
def test_money_reads_the_same_everywhere(amount: str, shown: str) -> None:
    assert money(Decimal(amount)) == shown
    assert money(amount) == shown


@pytest.mark.parametrize(
    ("part", "whole", "shown"),
    [
        ("0.004", "2", "0.2%"),
        ("0.032", "2", "1.6%"),
        ("0.33", "2", "16%"),
        ("0.0000064", "2", "0.00032%"),
        ("0", "1", "0%"),
        ("1", "0", "no cap"),
    ],
)
def test_a_small_share_still_shows(part: str, whole: str, shown: str) -> None:
    assert share(Decimal(part), Decimal(whole)) == shown


def test_nonsense_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="not an amount of money"):
        money("a lot")
