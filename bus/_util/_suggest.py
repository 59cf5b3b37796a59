""" "Did you mean ...?": the closest valid names to a mistyped one.

Every "unknown name" error in sopbus (a scenario key, an action in ``watch``, a SOP, a
model) ends with the same kind of hint, so they all come from here.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, candidates: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The at most ``n`` candidates closest to ``name``, best first; ``[]`` when none is close.

    Case is ignored when comparing (``reviewcode`` finds ``ReviewCode``), and a candidate
    that differs from ``name`` only by case comes first.

    >>> closest("max_round", ["max_rounds", "seed", "mode"])
    ['max_rounds']
    """
    by_folded: dict[str, list[str]] = {}
    for candidate in candidates:
        by_folded.setdefault(candidate.casefold(), []).append(candidate)
    folded = name.casefold()
    matches = difflib.get_close_matches(folded, list(by_folded), n=n, cutoff=cutoff)
    if folded in by_folded and folded not in matches:
        matches.insert(0, folded)
    found = [original for match in matches for original in by_folded[match] if original != name]
    return found[:n]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``"; did you mean `a` or `b`?"`` for the closest candidates, or ``""`` if none is
    close. Meant to be appended to an error message."""
    found = closest(name, candidates)
    if not found:
        return ""
    quoted = [f"`{c}`" for c in found]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {listed}?"
