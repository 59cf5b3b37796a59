"""A population run in the report: its per-round sums from ``summary.json`` (the curve of
the mean with its min..max band, the last round's distribution, agents woken and acted;
for a population on a follower graph its adoption curve, :mod:`._adoption`), and the calls of a run too many to draw one bar each.

A population's agents (``Player-17``) are one lane, one role of the money charts and one
row of the tables: a thousand agents are one crowd, not a thousand lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from html import escape
from typing import Any

import altair as alt

from ._adoption import is_spread, spread_part
from ._data import Call, RunData
from ._vega import named, to_svg

CALLS_DRAWN = 1_000
"""Past this many model calls the timeline draws counts per round and role instead of a
bar per call: a bar per call of a run of a million agents is a page no browser opens."""


def crowds(data: RunData) -> tuple[str, ...]:
    """The run's populations, by name (none for a run without)."""
    return tuple((data.summary.populations or {}) if data.summary is not None else ())


def lane_of(role: str, names: Sequence[str]) -> str:
    """``role``, or its population's name when it is one of that population's agents."""
    prefix, _, number = role.rpartition("-")
    return prefix if prefix in names and number.isdigit() else role


def population_section(data: RunData) -> str:
    """One part per population: the per-round table, the curve and the last distribution."""
    pops = (data.summary.populations or {}) if data.summary is not None else {}
    return "".join(_one(name, rounds) for name, rounds in pops.items())


def _one(name: str, rounds: list[dict[str, Any]]) -> str:
    if not rounds:
        return f"<h3>{escape(name)}</h3><p class=note>no round of {escape(name)} ran</p>"
    if is_spread(rounds):
        return spread_part(name, rounds)
    rows = "".join(
        f'<tr data-round="{_value(r["round"])}">'
        + "".join(
            f'<td data-field="{k}" data-value="{_value(r.get(k))}">{_shown(r.get(k))}</td>'
            for k in _COLUMNS
        )
        + "</tr>"
        for r in rounds
    )
    head = "".join(f"<th>{k}</th>" for k in _COLUMNS)
    last = rounds[-1]
    when = _value(last["round"])
    field = escape(str(last.get("field") or "answer"))
    counts = last["bins"]["counts"]
    low, high = last["bins"]["low"], last["bins"]["high"]
    step = (high - low) / max(len(counts), 1)
    edges = "".join(
        f"<th>{low + i * step:g}..{low + (i + 1) * step:g}</th>" for i in range(len(counts))
    )
    bins = "".join(f'<td data-bin="{i}" data-value="{n}">{n:,}</td>' for i, n in enumerate(counts))
    return (
        f'<div class=population data-population="{escape(name)}"><h3>{escape(name)}</h3>'
        f"<p class=note>{len(rounds)} rounds; the line is the mean {field} per round, the band "
        f"its min..max; the bars are round {when}'s {field} in ten bins over "
        f"{last['bins']['low']:g}..{last['bins']['high']:g}.</p>"
        f"<div class=chart>{_curve_svg(name, rounds, str(last.get('field') or 'answer'))}</div>"
        f"<table class=list><caption>{escape(name)} per round</caption><tr>{head}</tr>"
        f"{rows}</table><table class=list data-bins><caption>round {when}: agents "
        f"per {field} bin</caption><tr>{edges}</tr><tr>{bins}</tr></table></div>"
    )


_COLUMNS = ("round", "woke", "acted", "failed", "mean", "min", "max")


def _value(x: Any) -> str:
    return "" if x is None else escape(str(x))


def _shown(x: Any) -> str:
    if isinstance(x, (int, float)):
        return f"{x:,}" if isinstance(x, int) else f"{x:g}"
    return "-" if x is None else escape(str(x))  # a summary.json edited by hand


def _curve_svg(name: str, rounds: list[dict[str, Any]], field: str) -> str:
    valued = [r for r in rounds if r.get("mean") is not None]
    x = alt.X("round:O", title="round", axis=alt.Axis(labelAngle=0))
    band = named("curve").mark_area(opacity=0.25).encode(x=x, y="min:Q", y2="max:Q")
    line = (
        named("curve").mark_line(point=True).encode(x=x, y=alt.Y("mean:Q", title=f"mean {field}"))
    )
    curve = alt.layer(band, line).properties(width=260, height=200, title=f"{name}: mean per round")
    last = rounds[-1]
    low, high, counts = last["bins"]["low"], last["bins"]["high"], last["bins"]["counts"]
    step = (high - low) / max(len(counts), 1)
    bins = [
        {"from": round(low + i * step, 4), "to": round(low + (i + 1) * step, 4), "agents": n}
        for i, n in enumerate(counts)
    ]
    bars = (
        named("bins")
        .mark_bar()
        .encode(
            x=alt.X("from:Q", bin="binned", title=field),
            x2="to:Q",
            y=alt.Y("agents:Q", title="agents"),
        )
        .properties(width=260, height=200, title=f"round {last['round']}: {field}", name="bins")
    )
    counted = (
        named("counted")
        .transform_fold(["woke", "acted"], as_=["kind", "agents"])
        .mark_line(point=True)
        .encode(x=x, y=alt.Y("agents:Q", title="agents"), color=alt.Color("kind:N", title=""))
        .properties(width=260, height=200, title="agents woken and acted")
    )
    data = {"curve": valued, "bins": bins, "counted": rounds}
    return to_svg(alt.hconcat(curve, bars, counted), data)


def calls_by_round(calls: Sequence[Call], names: Sequence[str]) -> str:
    """The calls as counts per round and lane (role or population), stacked by outcome."""
    counted = Counter((c.line.round, lane_of(c.line.role, names), c.line.outcome) for c in calls)
    rows: list[dict[str, Any]] = [
        {"round": r, "lane": lane, "outcome": outcome, "calls": n}
        for (r, lane, outcome), n in sorted(counted.items())
    ]
    chart = (
        named("per_round")
        .mark_bar()
        .encode(
            x=alt.X("round:O", title="round"),
            y=alt.Y("calls:Q", title="model calls", stack="zero"),
            color=alt.Color("outcome:N", title="outcome"),
            row=alt.Row("lane:N", title=None),
        )
        .properties(width=700, height=120, name="per_round")
    )
    table = "".join(
        f'<tr data-round="{row["round"]}" data-lane="{escape(row["lane"])}" '
        f'data-outcome="{row["outcome"]}" data-value="{row["calls"]}"><td>{row["round"]}</td>'
        f"<td>{escape(row['lane'])}</td><td>{row['outcome']}</td><td>{row['calls']:,}</td></tr>"
        for row in rows
    )
    return (
        f"<div class=chart>{to_svg(chart, {'per_round': rows})}</div>"
        f"<table class=list data-calls-by-round><caption>model calls per round and role"
        f"</caption><tr><th>round</th><th>role</th><th>outcome</th><th>calls</th></tr>"
        f"{table}</table>"
    )
