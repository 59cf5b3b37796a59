"""A sweep's page: spend against verdict pass rate per variant, the spend of each variant's
runs, and a link to every run's own report; one offline HTML file like a run's report.

The CLI hands over plain rows (the sweep's bookkeeping lives in ``sopbus.sweep``): one row
per variant (as ``sopbus sweep-show --json`` prints them) and one per run (variant, seed,
state, spend, verdict and the path of its report relative to the page).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from html import escape
from typing import Any

import altair as alt

from ..money import money
from ._build import _document
from ._header import machine_mark
from ._vega import named, to_svg


def build_sweep_report(
    title: str,
    facts: Mapping[str, Any],
    variants: Sequence[Mapping[str, Any]],
    runs: Sequence[Mapping[str, Any]],
) -> str:
    """The page as one HTML document (see the module docstring). A run's ``provider``,
    when given, puts the run report's SIMULATED or REPLAYED mark on the page."""
    sections = [
        ("tradeoff", "Spend against pass rate", _tradeoff(variants)),
        ("spread", "Spend per run, by variant", _spread(runs)),
        ("variants", "Variants", _variant_table(variants)),
        ("runs", "Runs", _run_table(runs)),
    ]
    head = "".join(
        f'<tr><th>{escape(k)}</th><td data-figure="{escape(k)}" data-value="{escape(str(v))}">'
        f"{escape(_fact(v))}</td></tr>"
        for k, v in facts.items()
    )
    body = "".join(
        f'<section id="{sid}"><h2>{name}</h2>{html}</section>' for sid, name, html in sections
    )
    nav = "".join(f'<a href="#{sid}">{name}</a>' for sid, name, _ in sections)
    mark = machine_mark(sorted({str(r["provider"]) for r in runs if r.get("provider")}))
    return _document(
        title,
        f"<nav>{nav}</nav><main><header><h1>{escape(title)}</h1>{mark}"
        f'<table class="facts">{head}</table></header>{body}</main>',
        scripted=False,
    )


_W, _H = 560, 300  # the trade-off plot, in pixels: labels are placed in its pixel space
_LINE_PX, _CHAR_PX = 15, 6.6  # an 11 px label's line height and average character width


def _tradeoff(variants: Sequence[Mapping[str, Any]]) -> str:
    rows: list[dict[str, Any]] = [
        {
            "variant": str(v["variant"]),
            "mean_usd": float(v["spend_mean_usd"]),
            "pass_rate": float(v["pass_rate"]),
        }
        for v in variants
        if v.get("spend_mean_usd") is not None and v.get("pass_rate") is not None
    ]
    if not rows:
        return "<p>No variant has both finished runs and a verdict (the SOP states none).</p>"
    top = max(r["mean_usd"] for r in rows) * 1.15 or 1e-6
    _place_labels(rows, top)
    x = alt.X(
        "mean_usd:Q",
        title="mean spend per run",
        scale=alt.Scale(domain=[0, top], nice=False),
        axis=alt.Axis(format="$.2~r", tickCount=6),
    )
    y = alt.Y(
        "pass_rate:Q",
        title="verdict pass rate",
        scale=alt.Scale(domain=[0, 1]),
        axis=alt.Axis(format=".0%"),
    )
    base = named("tradeoff")
    points = base.mark_circle(size=120).encode(x=x, y=y, color=alt.Color("variant:N", legend=None))
    leaders = base.mark_rule(color="#999", strokeWidth=0.8).encode(
        x=x, y=y, x2="label_x:Q", y2="label_y:Q"
    )
    labels = (
        base.mark_text(align="left", baseline="middle", fontSize=11)
        .encode(x="label_x:Q", y="label_y:Q", text="variant:N")
        .properties(name="labels")
    )
    chart = alt.layer(points, leaders, labels).properties(width=_W, height=_H)
    return to_svg(chart, {"tradeoff": rows})


def _place_labels(rows: list[dict[str, Any]], top: float) -> None:
    """Puts each point's label to its right, moved down until it overprints no point and
    no label placed before it (Vega-Lite has no label layout); ``label_x``, ``label_y`` in
    data units."""
    dot = 7  # half a point's width, in pixels: no label covers another point either
    placed = [
        (px - dot, py - dot, px + dot, py + dot)
        for px, py in ((r["mean_usd"] / top * _W, (1 - r["pass_rate"]) * _H) for r in rows)
    ]
    for row in sorted(rows, key=lambda r: (-r["pass_rate"], r["mean_usd"])):
        left = row["mean_usd"] / top * _W + 10
        width = len(row["variant"]) * _CHAR_PX
        y = (1 - row["pass_rate"]) * _H
        while any(
            left < x1 and x0 < left + width and y - _LINE_PX / 2 < y1 and y0 < y + _LINE_PX / 2
            for x0, y0, x1, y1 in placed
        ):
            y += _LINE_PX
        placed.append((left, y - _LINE_PX / 2, left + width, y + _LINE_PX / 2))
        row["label_x"] = (left - 4) / _W * top
        row["label_y"] = 1 - y / _H


def _spread(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        {"variant": r["variant"], "usd": float(r["total_usd"])}
        for r in runs
        if r.get("total_usd") is not None
    ]
    if not rows:
        return "<p>No run has ended yet.</p>"
    x = alt.X("usd:Q", title="spend of a run", axis=alt.Axis(format="$.2~r", tickCount=6))
    box = (
        named("spread").mark_boxplot(extent="min-max").encode(x=x, y=alt.Y("variant:N", title=None))
    )
    dots = named("spread").mark_tick(color="#333").encode(x="usd:Q", y="variant:N")
    return to_svg((box + dots).properties(width=_W), {"spread": rows})


# column -> (heading, how a person reads the value)
_COLUMNS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "variant": ("variant", str),
    "runs": ("runs", str),
    "ended": ("ended", str),
    "skipped": ("skipped", str),
    "pass_rate": ("pass rate", lambda v: f"{float(v):.0%}"),
    "spend_mean_usd": ("mean spend", money),
    "spend_median_usd": ("median spend", money),
    "spend_max_usd": ("most spent", money),
    "tokens_mean": ("mean tokens", lambda v: f"{round(float(v)):,} tokens"),
    "wall_s_mean": ("mean wall time", lambda v: f"{float(v):,.2f} s"),
    "rounds_mean": ("mean rounds", lambda v: f"{float(v):,.1f}"),
}


def _variant_table(variants: Sequence[Mapping[str, Any]]) -> str:
    """Each value for people in the cell; the exact one in its ``data-value``."""
    head = "".join(f"<th>{name}</th>" for name, _ in _COLUMNS.values())
    body = "".join(
        "<tr>"
        + "".join(
            f'<td data-col="{c}" data-value="{escape(str(v.get(c)))}">'
            f"{escape('n/a' if v.get(c) is None else shown(v[c]))}</td>"
            for c, (_, shown) in _COLUMNS.items()
        )
        + "</tr>"
        for v in variants
    )
    return f'<table class="variants"><tr>{head}</tr>{body}</table>'


def _run_table(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for r in runs:
        link = (
            f'<a class="run-report" href="{escape(r["report"])}">{escape(r["run_id"])}</a>'
            if r.get("report")
            else escape(r["run_id"])
        )
        spent = r.get("total_usd")
        rows.append(
            f"<tr><td>{link}</td><td>{escape(r['variant'])}</td><td>{r['seed']}</td>"
            f'<td>{escape(str(r["state"]))}</td><td data-value="{spent}">'
            f"{'n/a' if spent is None else money(spent)}</td>"
            f"<td>{escape(_verdict(r.get('verdict')))}</td></tr>"
        )
    return (
        '<table class="runs"><tr><th>run</th><th>variant</th><th>seed</th><th>state</th>'
        f"<th>spend</th><th>verdict</th></tr>{''.join(rows)}</table>"
    )


def _verdict(value: Any) -> str:
    return "n/a" if value is None else "passed" if value else "failed"


def _fact(value: Any) -> str:
    """A header fact for people: amounts (decimals and floats) as money."""
    if value is None:
        return "n/a"
    return money(value) if isinstance(value, (Decimal, float)) else str(value)
