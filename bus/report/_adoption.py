"""A population on a follower graph in the report: the adoption curve (agents reached and
adopting so far, per round), the round's choices (ignored, liked, reposted) and a table of
the same sums from ``summary.json``."""

from __future__ import annotations

from html import escape
from typing import Any

import altair as alt

from ._vega import named, to_svg

COLUMNS = ("round", "woke", "acted", "failed", "ignored", "liked", "reposted", "reached")
"""The table's columns besides ``adopters`` and ``adoption`` (the curve's own)."""
CHOICES = ("ignored", "liked", "reposted")


def is_spread(rounds: list[dict[str, Any]]) -> bool:
    """Whether ``rounds`` are the sums of a population on a follower graph."""
    return any("adopters" in r for r in rounds)


def spread_part(name: str, rounds: list[dict[str, Any]]) -> str:
    """The part of one population on a follower graph: the charts, then the table."""
    columns = (*COLUMNS, "adopters", "adoption")
    head = "".join(f"<th>{k}</th>" for k in columns)
    rows = "".join(
        f'<tr data-round="{_value(r.get("round"))}">'
        + "".join(
            f'<td data-field="{k}" data-value="{_value(r.get(k))}">{_shown(k, r.get(k))}</td>'
            for k in columns
        )
        + "</tr>"
        for r in rounds
    )
    last = rounds[-1]
    return (
        f'<div class=population data-population="{escape(name)}" data-spread>'
        f"<h3>{escape(name)}</h3><p class=note>{len(rounds)} rounds on a follower graph; the "
        f"curve is the agents the post has reached and the agents who adopted it (liked or "
        f"reposted) so far, {_value(last.get('adopters'))} of them after round "
        f"{_value(last.get('round'))}; the bars are each round's choices.</p>"
        f"<div class=chart>{_charts_svg(name, rounds)}</div>"
        f"<table class=list><caption>{escape(name)} per round</caption><tr>{head}</tr>"
        f"{rows}</table></div>"
    )


def _charts_svg(name: str, rounds: list[dict[str, Any]]) -> str:
    x = alt.X("round:O", title="round", axis=alt.Axis(labelAngle=0))
    curve = (
        named("adoption")
        .transform_fold(["reached", "adopters"], as_=["kind", "agents"])
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("agents:Q", title="agents so far"),
            color=alt.Color("kind:N", title="", sort=["reached", "adopters"]),
        )
        .properties(width=320, height=200, title=f"{name}: adoption curve")
    )
    choices = [
        {"round": r["round"], "choice": c, "agents": r.get(c) or 0} for r in rounds for c in CHOICES
    ]
    bars = (
        named("choices")
        .mark_bar()
        .encode(
            x=x,
            y=alt.Y("agents:Q", title="agents", stack="zero"),
            color=alt.Color("choice:N", title="", sort=list(CHOICES)),
        )
        .properties(width=260, height=200, title="choices per round", name="choices")
    )
    data = {"adoption": rounds, "choices": choices}
    return to_svg(alt.hconcat(curve, bars).resolve_scale(color="independent"), data)


def _value(x: Any) -> str:
    return "" if x is None else escape(str(x))


def _shown(key: str, x: Any) -> str:
    if key == "adoption" and isinstance(x, (int, float)):
        return f"{x:.1%}"
    if isinstance(x, int):
        return f"{x:,}"
    return "-" if x is None else escape(str(x))  # a summary.json edited by hand
