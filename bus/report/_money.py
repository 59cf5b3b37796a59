"""Where the money went: cumulative spend against the budget, by role, and cost and tokens
by role, action and model. Amounts come from the cost ledger (:func:`sopbus.bus.cost_report`);
charts get them as floats (pictures), the tables beside them keep the ledger's decimals.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import altair as alt

from ..money import money, share
from ._crowd import lane_of
from ._data import Call
from ._vega import named, to_svg

# A cumulative series is monotone, so keeping every k-th point keeps its shape; a run of
# 10,000 calls still draws a few hundred points per role.
_MAX_POINTS = 400


def spend_svg(calls: Sequence[Call], budget: Decimal, crowds: Sequence[str] = ()) -> str:
    """Cumulative spend against the budget (left) and stacked by role (right). A spend far
    below the cap is drawn on its own scale, with the cap's share on a second axis and
    the cap named above it, so 1% of the cap still shows when the money went."""
    total, by_role = _series(calls, crowds)
    spent, cap = _last(total), float(budget)
    # The cap's scale while the spend is a fair share of it; else the spend's, with air.
    top = cap if cap and spent >= cap / ZOOM_BELOW else spent * 1.1 or 1e-6
    x = alt.X(
        "t:Q",
        title="seconds since the run started",
        scale=alt.Scale(zero=False),
        axis=alt.Axis(tickCount=5, labelOverlap="greedy"),
    )
    usd = alt.Y("usd:Q", title="USD spent", scale=alt.Scale(domain=[0, top], nice=False))
    line = named("total").mark_line(interpolate="step-after").encode(x=x, y=usd)
    left: Any = line.properties(name="spend")
    data: dict[str, list[dict[str, Any]]] = {"total": total, "roles": by_role}
    if cap:
        off = top < cap
        spent_share = share(Decimal(str(spent)), budget)
        where = f" is off this scale: {spent_share} of it spent" if off else ""
        data["budget"] = [{"usd": cap, "label": f"budget {money(budget)}{where}"}]
        # One scale, two axes: dollars on the left, the same heights as shares on the right.
        left = alt.layer(left, *_cap_mark(off), _shares(x, cap)).resolve_axis(y="independent")
    right = (
        named("roles")
        .mark_area(interpolate="step-after", opacity=0.85)
        .encode(
            x=x,
            y=alt.Y("usd:Q", stack="zero", title="USD spent, by role"),
            color=alt.Color("role:N", scale=alt.Scale(scheme="tableau10")),
        )
        .properties(width=380, height=220, title="cumulative spend by role")
    )
    title = "spend against the budget"
    return to_svg(alt.hconcat(left.properties(width=380, height=220, title=title), right), data)


ZOOM_BELOW = 5  # a spend under a fifth of the cap gets its own scale


def _shares(x: alt.X, cap: float) -> alt.Chart:
    """An invisible copy of the spend whose axis, on the right, reads it as budget shares."""
    axis = alt.Axis(
        orient="right",
        title="share of the budget",
        grid=False,
        labelExpr=f"format(datum.value / {cap!r}, '.2~%')",
    )
    return (
        named("total")
        .mark_line(interpolate="step-after", opacity=0)
        .encode(x=x, y=alt.Y("usd:Q", axis=axis))
    )


def _cap_mark(off: bool) -> list[alt.Chart]:
    """The budget as a dashed line, or, off the scale, as its label along the top."""
    text = named("budget").mark_text(align="left", dx=4, dy=9 if off else -7, color="#e45756")
    text = text.encode(x=alt.value(0), text="label:N").properties(name="budget_label")
    if off:
        return [text.encode(y=alt.value(0))]
    rule = named("budget").mark_rule(color="#e45756", strokeDash=[6, 4], strokeWidth=2)
    on_scale = alt.Y("usd:Q", axis=None)
    return [rule.encode(y=on_scale), text.encode(y=on_scale)]


def _last(total: list[dict[str, Any]]) -> float:
    return float(total[-1]["usd"]) if total else 0.0


def _series(
    calls: Sequence[Call], crowds: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The running total, and the running total of each role (a population's agents as one),
    at (a sample of) each call's end."""
    roles = list(dict.fromkeys(lane_of(c.line.role, crowds) for c in calls))
    step = max(1, len(calls) // _MAX_POINTS)
    spent = dict.fromkeys(roles, Decimal(0))
    t0 = round(calls[0].start, 4) if calls else 0.0
    total: list[dict[str, Any]] = [{"t": t0, "usd": 0.0}]
    by_role: list[dict[str, Any]] = [{"t": t0, "role": r, "usd": 0.0} for r in roles]
    for i, call in enumerate(calls):
        spent[lane_of(call.line.role, crowds)] += call.line.cost_usd
        if i % step == 0 or i == len(calls) - 1:
            t = round(call.end, 4)
            total.append({"t": t, "usd": float(call.line.total_usd)})
            by_role += [{"t": t, "role": r, "usd": float(v)} for r, v in spent.items()]
    return total, by_role


_GROUPS = (("by_role", "role"), ("by_action", "action"), ("by_model", "model"))


def breakdown_svg(report: dict[str, Any]) -> str:
    """Cost (top) and prompt/completion tokens (bottom) by role, action and model."""
    cost_rows, token_rows = [], []
    for key, field in _GROUPS:
        for name, entry in report[key].items():
            cost_rows.append({"group": field, "name": name or "-", "usd": float(entry["cost_usd"])})
            for kind in ("prompt", "completion"):
                token_rows.append(
                    {
                        "group": field,
                        "name": name or "-",
                        "kind": kind,
                        "tokens": entry[f"{kind}_tokens"],
                    }
                )
    costs = [_bars("cost", field, "usd:Q", "USD", None) for _, field in _GROUPS]
    tokens = [_bars("tokens", field, "tokens:Q", "tokens", "kind:N") for _, field in _GROUPS]
    chart = alt.vconcat(alt.hconcat(*costs), alt.hconcat(*tokens)).resolve_scale(
        color="independent"
    )
    return to_svg(chart, {"cost": cost_rows, "tokens": token_rows})


def _bars(data: str, field: str, value: str, title: str, stack: str | None) -> alt.Chart:
    enc: dict[str, Any] = {
        "y": alt.Y("name:N", sort="-x", title=field, axis=alt.Axis(labelLimit=140)),
        "x": alt.X(value, title=title),
    }
    if stack:
        enc["color"] = alt.Color(
            stack,
            title="tokens",
            scale=alt.Scale(domain=["prompt", "completion"], range=["#4c78a8", "#f58518"]),
        )
    return (
        named(data)
        .mark_bar()
        .encode(**enc)
        .transform_filter(alt.datum.group == field)
        .properties(width=200, title=f"{title} by {field}")
    )
