"""Where the money went: cumulative spend against the budget, by role, and cost and tokens
by role, action and model. Amounts come from the cost ledger (:func:`sopbus.bus.cost_report`);
charts get them as floats (pictures), the tables beside them keep the ledger's decimals.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import altair as alt

from ..money._format import money
from ._data import Call
from ._vega import named, to_svg

# A cumulative series is monotone, so keeping every k-th point keeps its shape; a run of
# 10,000 calls still draws a few hundred points per role.
_MAX_POINTS = 400


def spend_svg(calls: Sequence[Call], budget: Decimal) -> str:
    """Cumulative spend over time with the budget as a line (left), and the same spend
    stacked by role on its own scale (right: a small spend under a large cap stays visible)."""
    total, by_role = _series(calls)
    x = alt.X("t:Q", title="seconds since the run started", scale=alt.Scale(zero=False))
    line = (
        named("total")
        .mark_line(point=len(total) < 60, interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y(
                "usd:Q",
                title="USD spent",
                scale=alt.Scale(domain=[0, max(float(budget), _last(total))]),
            ),
        )
    )
    cap = (
        named("budget")
        .mark_rule(color="#e45756", strokeDash=[6, 4], strokeWidth=2)
        .encode(y="usd:Q")
    )
    cap_text = (
        named("budget")
        .mark_text(align="left", dx=4, dy=-7, color="#e45756")
        .encode(y="usd:Q", x=alt.value(0), text="label:N")
    )
    left = alt.layer(line, cap, cap_text).properties(
        width=380, height=220, title="spend against the budget"
    )
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
    budget_rows = [{"usd": float(budget), "label": f"budget {money(budget)}"}]
    return to_svg(
        alt.hconcat(left, right), {"total": total, "roles": by_role, "budget": budget_rows}
    )


def _last(total: list[dict[str, Any]]) -> float:
    return float(total[-1]["usd"]) if total else 0.0


def _series(calls: Sequence[Call]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The running total, and the running total of each role, at (a sample of) each call's end."""
    roles = list(dict.fromkeys(c.line.role for c in calls))
    step = max(1, len(calls) // _MAX_POINTS)
    spent = dict.fromkeys(roles, Decimal(0))
    t0 = round(calls[0].start, 4) if calls else 0.0
    total: list[dict[str, Any]] = [{"t": t0, "usd": 0.0}]
    by_role: list[dict[str, Any]] = [{"t": t0, "role": r, "usd": 0.0} for r in roles]
    for i, call in enumerate(calls):
        spent[call.line.role] += call.line.cost_usd
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
