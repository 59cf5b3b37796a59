"""A small guess_two_thirds scenario written beside a test."""

from __future__ import annotations

import re
from pathlib import Path

from support.paths import ROOT

SHIPPED = ROOT / "scenarios" / "guess_two_thirds.toml"


def small_game(
    tmp_path: Path,
    *,
    count: int = 20,
    rounds: int = 2,
    budget: str = "5.00",
    extra: str = "",
    name: str = "game.toml",
) -> Path:
    """The shipped game with ``count`` players, ``rounds`` game rounds and the cap
    ``budget``, its runs in ``tmp_path/runs``; ``extra`` is TOML added to the population's
    table (the file's last)."""
    text = SHIPPED.read_text(encoding="utf-8")
    for key, value in {
        "count": str(count),
        "rounds": str(rounds),
        "max_rounds": str(2 * rounds),
        "budget_usd": budget,
    }.items():
        text = re.sub(rf"(?m)^{key} = \S+", f"{key} = {value}", text, count=1)
    text = text.replace("[run]\n", f'[run]\nruns_dir = "{tmp_path / "runs"}"\n', 1)
    path = tmp_path / name
    path.write_text(text + extra, encoding="utf-8")
    return path
