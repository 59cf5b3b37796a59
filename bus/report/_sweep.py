"""A sweep's page: spend against verdict pass rate per variant, the spend of each variant's
runs, and a link to every run's own report; one offline HTML file like a run's report.

The CLI hands over plain rows (the sweep's bookkeeping lives in ``sopbus.sweep``): one row
per variant (as ``sopbus sweep-show --json`` prints them) and one per run (variant, seed,
state, spend, verdict and the path of its report relative to the page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import altair as alt

from ._build import _document
from ._vega import named, to_svg


def build_sweep_report(
    title: str,
    facts: Mapping[str, Any],
    variants: Sequence[Mapping[str, Any]],
    runs: Sequence[Mapping[str, Any]],
) -> str:
    """The page as one HTML document (see the module docstring)."""
    sections = [
        ("tradeoff", "Spend against pass rate", _tradeoff(variants)),
        ("spread", "Spend per run, by variant", _spread(runs)),
        ("variants", "Variants", _variant_table(variants)),
        ("runs", "Runs", _run_table(runs)),
    ]
    head = "".join(
        f'<tr><th>{escape(k)}</th><td data-figure="{escape(k)}">{escape(str(v))}</td></tr>'
        for k, v in facts.items()
    )
    body = "".join(
        f'<section id="{sid}"><h2>{name}</h2>{html}</section>' for sid, name, html in sections
    )
    nav = "".join(f'<a href="#{sid}">{name}</a>' for sid, name, _ in sections)
    return _document(
        title,
        f"<nav>{nav}</nav><main><header><h1>{escape(title)}</h1>"
        f'<table class="facts">{head}</table></header>{body}</main>',
        scripted=False,
    )


def _tradeoff(variants: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        {
            "variant": f"{v['variant']} {v['settings']}".strip(),
            "mean_usd": float(v["spend_mean_usd"]),
            "pass_rate": v["pass_rate"],
        }
        for v in variants
        if v.get("spend_mean_usd") is not None and v.get("pass_rate") is not None
    ]
    if not rows:
        return "<p>No variant has both finished runs and a verdict (the SOP states none).</p>"
    points = (
        named("tradeoff")
        .mark_circle(size=120)
        .encode(
            x=alt.X("mean_usd:Q", title="mean spend per run (USD)", scale=alt.Scale(zero=True)),
            y=alt.Y("pass_rate:Q", title="verdict pass rate", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("variant:N", legend=None),
        )
    )  # each point is labelled beside it
    labels = (
        named("tradeoff")
        .mark_text(align="left", dx=8)
        .encode(x="mean_usd:Q", y="pass_rate:Q", text="variant:N")
    )
    return to_svg((points + labels).properties(width=560, height=300), {"tradeoff": rows})


def _spread(runs: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        {"variant": r["variant"], "usd": float(r["total_usd"])}
        for r in runs
        if r.get("total_usd") is not None
    ]
    if not rows:
        return "<p>No run has ended yet.</p>"
    box = (
        named("spread")
        .mark_boxplot(extent="min-max")
        .encode(x=alt.X("usd:Q", title="spend of a run (USD)"), y=alt.Y("variant:N", title=None))
    )
    dots = named("spread").mark_tick(color="#333").encode(x="usd:Q", y="variant:N")
    return to_svg((box + dots).properties(width=560), {"spread": rows})


def _variant_table(variants: Sequence[Mapping[str, Any]]) -> str:
    cols = (
        "variant",
        "runs",
        "ended",
        "skipped",
        "pass_rate",
        "spend_mean_usd",
        "spend_median_usd",
        "spend_max_usd",
        "tokens_mean",
        "wall_s_mean",
        "rounds_mean",
    )
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(f'<td data-col="{c}">{escape(_cell(v.get(c)))}</td>' for c in cols)
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
        rows.append(
            f"<tr><td>{link}</td><td>{escape(r['variant'])}</td><td>{r['seed']}</td>"
            f"<td>{escape(str(r['state']))}</td><td>{escape(_cell(r.get('total_usd')))}</td>"
            f"<td>{escape(_verdict(r.get('verdict')))}</td></tr>"
        )
    return (
        '<table class="runs"><tr><th>run</th><th>variant</th><th>seed</th><th>state</th>'
        f"<th>spend (USD)</th><th>verdict</th></tr>{''.join(rows)}</table>"
    )


def _verdict(value: Any) -> str:
    return "n/a" if value is None else "passed" if value else "failed"


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
