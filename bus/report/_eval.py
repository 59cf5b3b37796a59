"""An eval's page: pass@1 per scenario with its 95% interval, pass@k per scenario when the
eval ran more than one epoch, pass@1 against dollars per task with the front marked,
failures by kind per scenario, and every task's outcome linked to its run's report; one
offline HTML file drawn as the sweep's page is.

The caller hands over plain rows (the eval's bookkeeping lives in ``sopbus.eval``): one
per scenario (as ``eval.json``'s ``figures`` hold them) and one per task and epoch
(scenario, task, epoch, outcome, dollars, tokens, seconds, the path of its run's report
relative to the page, or none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import altair as alt

from ..money import money
from ._build import _document
from ._header import machine_mark
from ._sweep import _fact, _place_labels
from ._vega import named, to_svg

_W, _H = 560, 300  # as the sweep's trade-off plot: its label placer works in this space
_FAILURES = ("wrong", "error", "timeout", "cut_off", "refused", "not_run")


def build_eval_report(
    title: str,
    facts: Mapping[str, Any],
    scenarios: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    *,
    simulated: str = "",
) -> str:
    """The page as one HTML document (see the module docstring). ``simulated``, when not
    empty, is the note that the scores measure nothing: it heads the page and every chart."""
    note = f'<p class="mark sim eval-simulated">{escape(simulated)}</p>' if simulated else ""
    sections = [
        ("score", "pass@1 per scenario (95% interval)", _score(scenarios)),
        *_pass_at_k_section(scenarios),
        ("tradeoff", "pass@1 against dollars per task", _tradeoff(scenarios)),
        ("failures", "Failures by kind", _failures(scenarios)),
        ("tasks", "Tasks", _task_table(tasks)),
    ]
    head = "".join(
        f'<tr><th>{escape(k)}</th><td data-figure="{escape(k)}" data-value="{escape(str(v))}">'
        f"{escape(_fact(v))}</td></tr>"
        for k, v in facts.items()
    )
    body = "".join(
        f'<section id="{sid}"><h2>{name}</h2>{note if sid != "tasks" else ""}{html}</section>'
        for sid, name, html in sections
    )
    nav = "".join(f'<a href="#{sid}">{name}</a>' for sid, name, _ in sections)
    mark = machine_mark(["sim"]) if simulated else ""  # the header's mark, as a run's report
    return _document(
        title,
        f"<nav>{nav}</nav><main><header><h1>{escape(title)}</h1>{mark}"
        f'<table class="facts">{head}</table></header>{body}</main>',
        scripted=False,
    )


def _scored(scenarios: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in scenarios if s.get("pass_at_1") is not None]


def _score(scenarios: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        {
            "scenario": str(s["scenario"]),
            "pass": float(s["pass_at_1"]),
            "low": float(s["pass_at_1_low"]),
            "high": float(s["pass_at_1_high"]),
        }
        for s in _scored(scenarios)
    ]
    if not rows:
        return "<p>No scenario has a scored task yet.</p>"
    x = alt.X("scenario:N", title=None, sort=None, axis=alt.Axis(labelAngle=0, labelLimit=200))
    y = alt.Y("pass:Q", title="pass@1", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%"))
    base = named("score")
    bars = base.mark_bar(width=36, color="#4c78a8").encode(x=x, y=y).properties(name="score")
    # The interval as a rule with a tick at each end (an error bar), one layer each, so a
    # reader of the SVG finds one whisker per scenario.
    whiskers = (
        base.mark_rule(color="#222", strokeWidth=1.5)
        .encode(x=x, y=alt.Y("low:Q", title="pass@1"), y2="high:Q")
        .properties(name="interval")
    )
    ends = (
        base.transform_fold(["low", "high"], as_=["end", "at"])
        .mark_tick(color="#222", thickness=1.5, size=14)
        .encode(x=x, y="at:Q")
        .properties(name="ends")
    )
    chart = alt.layer(bars, whiskers, ends).properties(width=_W, height=_H)
    return to_svg(chart, {"score": rows})


def _ks(scenarios: Sequence[Mapping[str, Any]]) -> list[int]:
    """The k of every ``pass_at_k`` figure the scenarios hold, 1 included, in order."""
    return sorted({int(key[8:]) for s in scenarios for key in s if _is_pass_at(key)})


def _is_pass_at(key: str) -> bool:
    return key.startswith("pass_at_") and key[8:].isdigit()


def _pass_at_k_section(scenarios: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """The pass@k section, only for an eval of more than one epoch (pass@1 is the score's)."""
    ks = _ks(scenarios)
    if len(ks) < 2:
        return []
    return [("passk", f"pass@k per scenario (k = 1 to {ks[-1]})", _pass_at_k(scenarios, ks))]


def _pass_at_k(scenarios: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> str:
    """pass@k against k, one line per scenario, and the same figures as a table."""
    rows = [
        {"scenario": str(s["scenario"]), "k": k, "pass": float(value)}
        for s in scenarios
        for k in ks
        if (value := s.get(f"pass_at_{k}")) is not None
    ]
    heads = "".join(f"<th>pass@{k}</th>" for k in ks)
    cells = "".join(
        f"<tr><td>{escape(str(s['scenario']))}</td>"
        + "".join(_k_cell(k, s.get(f"pass_at_{k}")) for k in ks)
        + "</tr>"
        for s in scenarios
    )
    table = f'<table class="passk"><tr><th>scenario</th>{heads}</tr>{cells}</table>'
    if not rows:
        return f"<p>No scenario has a scored task yet.</p>{table}"
    chart = (
        named("passk")
        .mark_line(point=True)
        .encode(
            x=alt.X("k:O", title="k (samples per task)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "pass:Q",
                title="pass@k",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format=".0%"),
            ),
            color=alt.Color("scenario:N", title=None, sort=None),
        )
        .properties(width=_W, height=_H, name="passk")
    )
    return to_svg(chart, {"passk": rows}) + table


def _k_cell(k: int, value: Any) -> str:
    if value is None:
        return f'<td data-k="{k}" data-value="">n/a</td>'
    return f'<td data-k="{k}" data-value="{float(value)!r}">{float(value):.1%}</td>'


def _tradeoff(scenarios: Sequence[Mapping[str, Any]]) -> str:
    rows: list[dict[str, Any]] = [
        {
            "variant": str(s["scenario"]) + (" (front)" if s.get("front") else ""),
            "mean_usd": float(s["usd_per_task"]),
            "pass_rate": float(s["pass_at_1"]),
            "front": "on the front" if s.get("front") else "beaten",
        }
        for s in _scored(scenarios)
        if s.get("usd_per_task") is not None
    ]
    if not rows:
        return "<p>No scenario has both a scored task and a cost.</p>"
    top = max(r["mean_usd"] for r in rows) * 1.15 or 1e-6
    _place_labels(rows, top)
    x = alt.X(
        "mean_usd:Q",
        title="dollars per task",
        scale=alt.Scale(domain=[0, top], nice=False),
        axis=alt.Axis(format="$.2~r", tickCount=6),
    )
    y = alt.Y(
        "pass_rate:Q", title="pass@1", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%")
    )
    base = named("tradeoff")
    shape = alt.Color(
        "front:N",
        title=None,
        scale=alt.Scale(domain=["on the front", "beaten"], range=["#d62728", "#888"]),
    )
    # The front as a step line through its points, cheapest first: nothing above it costs less.
    line = (
        base.transform_filter("datum.front == 'on the front'")
        .mark_line(color="#d62728", strokeDash=[4, 3], interpolate="step-after")
        .encode(x=x, y=y, order="mean_usd:Q")
        .properties(name="front")
    )
    points = base.mark_circle(size=120, opacity=1).encode(x=x, y=y, color=shape)
    leaders = base.mark_rule(color="#999", strokeWidth=0.8).encode(
        x=x, y=y, x2="label_x:Q", y2="label_y:Q"
    )
    labels = (
        base.mark_text(align="left", baseline="middle", fontSize=11)
        .encode(x="label_x:Q", y="label_y:Q", text="variant:N")
        .properties(name="labels")
    )
    chart = alt.layer(line, points, leaders, labels).properties(width=_W, height=_H)
    return to_svg(chart, {"tradeoff": rows})


def _failures(scenarios: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        {"scenario": str(s["scenario"]), "kind": k.replace("_", " "), "count": int(n)}
        for s in scenarios
        for k in _FAILURES
        if (n := s["kinds"].get(k, 0))
    ]
    counts = "".join(
        f"<tr><td>{escape(str(s['scenario']))}</td>"
        + "".join(
            f'<td data-kind="{k}" data-value="{int(s["kinds"].get(k, 0))}">'
            f"{int(s['kinds'].get(k, 0))}</td>"
            for k in _FAILURES
        )
        + "</tr>"
        for s in scenarios
    )
    heads = "".join(f"<th>{k.replace('_', ' ')}</th>" for k in _FAILURES)
    table = f'<table class="failures"><tr><th>scenario</th>{heads}</tr>{counts}</table>'
    if not rows:
        return f"<p>No task failed.</p>{table}"
    chart = (
        named("failures")
        .mark_bar()
        .encode(
            # Whole tasks only: Vega's own ticks would print 0, 0.5, 1 as "0 1 1".
            x=alt.X("count:Q", title="tasks", axis=alt.Axis(values=_whole(rows), format="d")),
            y=alt.Y("scenario:N", title=None, sort=None),
            color=alt.Color(
                "kind:N", title="failure", sort=[k.replace("_", " ") for k in _FAILURES]
            ),
        )
        .properties(width=_W, name="failures")
    )
    return to_svg(chart, {"failures": rows}) + table


def _whole(rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """The whole numbers up to the longest stacked bar, at most about ten of them."""
    most = max(
        sum(r["count"] for r in rows if r["scenario"] == s) for s in {r["scenario"] for r in rows}
    )
    step = max(1, -(-most // 10))
    return list(range(0, most + step, step))


def _task_table(tasks: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for t in tasks:
        name = escape(str(t["task"]))
        link = (
            f'<a class="run-report" href="{escape(t["report"])}">{name}</a>'
            if t.get("report")
            else name
        )
        rows.append(
            f'<tr data-task="{name}"><td>{link}</td><td>{escape(str(t["scenario"]))}</td>'
            f'<td>{t["epoch"]}</td><td data-col="outcome">{escape(str(t["outcome"]))}</td>'
            f'<td data-col="usd" data-value="{t["usd"]}">{money(t["usd"])}</td>'
            f'<td data-col="tokens" data-value="{t["tokens"]}">{int(t["tokens"]):,}</td>'
            f'<td data-col="seconds" data-value="{t["seconds"]}">{float(t["seconds"]):,.2f} s'
            "</td></tr>"
        )
    return (
        '<table class="tasks"><tr><th>task</th><th>scenario</th><th>epoch</th><th>outcome</th>'
        f"<th>$</th><th>tokens</th><th>seconds</th></tr>{''.join(rows)}</table>"
    )
