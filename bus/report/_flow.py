"""The two charts along the run's clock: the message flow and the calls timeline.

**Message flow**: roles are lanes; each delivery is an arrow from the sender's lane to the
recipient's, coloured by the message's ``cause_by`` and labelled with it, level, where the
labels fit (a crowded page leaves them to the legend and the click). In ``rounds`` mode
the axis is the publish order, grouped into bands by round (a round of fifty deliveries
gets fifty slots);
in ``events`` mode it is the time since the run started. A message that reached nobody
points at the ``(undelivered)`` lane, dashed. Every arrow links to ``#msg-<id>``: the page
shows that message whole.

**Calls timeline**: each LLM call is a bar on its role's lane from its start to its end, so
overlapping calls (concurrency) and the longest chain (critical path) can be seen; retries,
repairs and refusals carry a marker. Every bar links to ``#call-<seq>``. Each tool call of a
tool loop is its own mark under its role's bar: a thin bar over its duration behind a
right-pointing triangle, coloured ``tool`` (or ``tool error``), linked to ``#tool-<n>``;
the page's script shows its tool, arguments, duration, result size, error and cost on hover.

Big runs are paged: each page is one SVG of at most :data:`FLOW_PAGE` deliveries or
:data:`CALL_PAGE` calls, so a run of 10,000 messages gives pages that each open fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any, get_args

import altair as alt

from ..money import Outcome
from ._data import UNDELIVERED, Call, Posted, RunData, ToolMark
from ._vega import lane_axis, named, pages, to_svg

FLOW_PAGE = 250
CALL_PAGE = 500
_SLOT_PX = 16


def deliveries(data: RunData) -> list[dict[str, Any]]:
    """One row per delivery (a message to one recipient; an undelivered message is one row
    to the ``(undelivered)`` lane), in publish order."""
    lanes = data.lanes()
    index = {name: i for i, name in enumerate([*lanes, UNDELIVERED])}
    rows = []
    for posted in data.posted:
        for dst in posted.recipients or (UNDELIVERED,):
            rows.append(_delivery(posted, dst, index))
    return rows


def _delivery(posted: Posted, dst: str, index: dict[str, int]) -> dict[str, Any]:
    m = posted.message
    src_i, dst_i = index.get(m.sent_from, 0), index.get(dst, 0)
    return {
        "id": m.id,
        "round": m.round,
        "t": round(posted.t, 4),
        "src": m.sent_from,
        "dst": dst,
        "cause_by": m.cause_by,
        "y0": src_i,
        "y1": dst_i,
        "ytop": min(src_i, dst_i),
        "down": dst_i > src_i,
        "undelivered": posted.reason is not None,
        "href": f"#msg-{m.id}",
    }


def flow_pages(data: RunData) -> list[tuple[str, str]]:
    """The message flow as ``(label, svg)`` pages (see the module docstring)."""
    rows = deliveries(data)
    lanes = [*data.lanes(), *([UNDELIVERED] if any(r["undelivered"] for r in rows) else [])]
    events = data.mode == "events"
    chunks = pages(rows, FLOW_PAGE) if events else _by_round(rows, FLOW_PAGE)
    return [(_flow_label(list(chunk)), _flow_svg(list(chunk), lanes, events)) for chunk in chunks]


def _flow_label(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no messages"
    first, last = rows[0]["round"], rows[-1]["round"]
    span = f"round {first}" if first == last else f"rounds {first}-{last}"
    return f"{span} ({len(rows)} deliveries)"


def _by_round(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Pages of whole rounds, up to ``size`` deliveries (only a round larger than that is cut)."""
    from collections import Counter

    per_round = Counter(row["round"] for row in rows)
    out: list[list[dict[str, Any]]] = [[]]
    for row in rows:
        page = out[-1]
        starts_round = not page or page[-1]["round"] != row["round"]
        if page and (
            len(page) >= size or (starts_round and len(page) + per_round[row["round"]] > size)
        ):
            out.append([])
        out[-1].append(row)
    return out


def _flow_svg(rows: list[dict[str, Any]], lanes: list[str], events: bool) -> str:
    for slot, row in enumerate(rows):
        row["x"] = row["t"] if events else slot
    if events:
        x = alt.X("x:Q", title="seconds since the run started", scale=alt.Scale(zero=False))
        layers: list[Any] = []
        bands: list[dict[str, Any]] = []
    else:
        x = alt.X(
            "x:Q",
            title=None,
            axis=None,
            scale=alt.Scale(domain=[-0.5, max(len(rows), 1) - 0.5], nice=False, zero=False),
        )
        bands = _round_bands(rows)
        layers = _band_layers(x)
    y = lane_axis(lanes, "y0")
    color = alt.Color("cause_by:N", title="cause_by", scale=alt.Scale(scheme="tableau10"))
    delivered = alt.datum.undelivered == False  # noqa: E712 (a Vega expression, not Python)
    # Links on the arrows and their heads only: every linked mark costs vl-convert time.
    base = named("flow").encode(x=x, color=color)
    linked = base.encode(href="href:N")
    layers += [
        linked.mark_rule(strokeWidth=2.5)
        .encode(y=y, y2="y1:Q")
        .transform_filter(delivered)
        .properties(name="arrows"),
        linked.mark_rule(strokeWidth=2.5, strokeDash=[4, 3])
        .encode(y=y, y2="y1:Q")
        .transform_filter(alt.datum.undelivered == True)  # noqa: E712 (a Vega expression)
        .properties(name="undelivered"),
        linked.mark_point(filled=True, size=70)
        .encode(
            y=alt.Y("y1:Q"),
            shape=alt.Shape(
                "down:N",
                legend=None,
                scale=alt.Scale(domain=[True, False], range=["triangle-down", "triangle-up"]),
            ),
        )
        .transform_filter(delivered),
        linked.mark_point(size=70, shape="cross", strokeWidth=2)
        .encode(y=alt.Y("y1:Q"))
        .transform_filter(alt.datum.undelivered == True),  # noqa: E712
    ]
    label_px = _label_px(rows)
    slot = max(_SLOT_PX, min(max(64, label_px), 1100 // max(len(rows), 1)))
    width = 900 if events else max(320, len(rows) * slot)
    if _labels_fit(rows, label_px, width if events else None, slot):
        # Level, above the arrow's upper end, no wider than the arrow's own column.
        layers.append(
            base.mark_text(fontSize=10, dy=-9, align="center", baseline="bottom")
            .encode(y=alt.Y("ytop:Q"), text="cause_by:N", color=alt.value("#333"))
            .properties(name="labels")
        )
    chart = alt.layer(*layers).properties(width=width, height=max(120, 44 * len(lanes)))
    return to_svg(chart, {"flow": rows, "bands": bands})


_CHAR_PX = 6.2  # the average width of a 10 px sans-serif character, with some to spare


def _label_px(rows: list[dict[str, Any]]) -> int:
    return int(max((len(r["cause_by"]) for r in rows), default=0) * _CHAR_PX) + 8


def _labels_fit(
    rows: list[dict[str, Any]], label_px: int, events_width: int | None, slot: int
) -> bool:
    """Whether every arrow's label fits beside its neighbours' (else the colour, the
    legend and a click on the arrow tell its cause_by)."""
    if events_width is None:
        return slot >= label_px
    xs = sorted(r["x"] for r in rows)
    span = (xs[-1] - xs[0]) if xs else 0
    gaps = [b - a for a, b in pairwise(xs)]
    # 0.9: the axis rounds its ends outwards, so the span takes a little less than the width
    return len(xs) < 2 or (span > 0 and min(gaps) / span * events_width * 0.9 >= label_px)


def _round_bands(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    bands: list[dict[str, Any]] = []
    for row in rows:
        if bands and bands[-1]["round"] == row["round"]:
            bands[-1]["x2"] = row["x"] + 0.5
        else:
            bands.append(
                {
                    "round": row["round"],
                    "x": row["x"] - 0.5,
                    "x2": row["x"] + 0.5,
                    "label": f"round {row['round']}",
                    "odd": len(bands) % 2,
                }
            )
    for band in bands:
        band["mid"] = (band["x"] + band["x2"]) / 2
    return bands


def _band_layers(x: alt.X) -> list[Any]:
    base = named("bands")
    rect = base.mark_rect(opacity=0.5).encode(
        x=x,
        x2="x2:Q",
        fill=alt.Fill(
            "odd:N", legend=None, scale=alt.Scale(domain=[0, 1], range=["#f4f6fa", "#ffffff"])
        ),
    )
    text = base.mark_text(baseline="top", fontSize=10, color="#555", dy=-14).encode(
        x=alt.X("mid:Q", axis=None), y=alt.value(0), text="label:N"
    )
    return [rect, text]


def call_pages(data: RunData) -> list[tuple[str, str]]:
    """The calls timeline as ``(label, svg)`` pages (see the module docstring); a page
    holds the tool calls that ended between its first call's start and the next page's."""
    calls = data.llm_calls
    lanes = list(
        dict.fromkeys(
            [
                *(r.name for r in data.roles),
                *(c.line.role for c in calls),
                *(t.role for t in data.tools),
            ]
        )
    )
    chunks = [list(chunk) for chunk in pages(calls, CALL_PAGE)] if calls else [[]]
    cuts = [chunk[0].start for chunk in chunks[1:]]
    tools: list[list[ToolMark]] = [[] for _ in chunks]
    for mark in data.tools:
        tools[sum(mark.end >= cut for cut in cuts)].append(mark)
    return [
        (_calls_label(chunk, len(marks)), _calls_svg(chunk, marks, lanes))
        for chunk, marks in zip(chunks, tools, strict=True)
    ]


def _calls_label(calls: Sequence[Call], tools: int) -> str:
    if not calls:
        return f"{tools} tool calls" if tools else "no calls"
    with_tools = f", {tools} tool calls" if tools else ""
    return (
        f"calls {calls[0].line.seq}-{calls[-1].line.seq} "
        f"({calls[0].start:.1f}-{calls[-1].end:.1f} s{with_tools})"
    )


def call_row(call: Call) -> dict[str, Any]:
    line = call.line
    status = call.mark or line.outcome
    if line.outcome != "ok":
        status = line.outcome
    return {
        "seq": line.seq,
        "role": line.role,
        "action": line.action,
        "start": round(call.start, 4),
        "end": round(max(call.end, call.start), 4),
        "status": status,
        "mark": call.mark,
        "outcome": line.outcome,
        "href": f"#call-{line.seq}",
    }


def tool_row(mark: ToolMark) -> dict[str, Any]:
    return {
        "n": mark.n,
        "role": mark.role,
        "action": mark.data.get("action", ""),
        "tool": mark.name,
        "start": round(mark.start, 4),
        "end": round(max(mark.end, mark.start), 4),
        "status": TOOL_ERROR if mark.data.get("error") else TOOL,
        "href": f"#tool-{mark.n}",
    }


TOOL, TOOL_ERROR = "tool", "tool error"
# Every ledger outcome gets a colour (taken from the ledger's own type, so a new outcome
# is drawn too), and first attempts are told apart from retries and repairs; tool calls
# have colours of their own, last, so the legend lists them after the model calls.
_STATUS = ["ok", "repair", "retry", *(o for o in get_args(Outcome) if o != "ok"), TOOL, TOOL_ERROR]
_PALETTE = [
    "#4c78a8",
    "#f58518",
    "#b279a2",
    "#72b7b2",
    "#e45756",
    "#9d755d",
    "#bab0ac",
    "#54a24b",
    "#eeca3b",
    "#ff9da6",
    "#79706e",
]
_COLORS = [_PALETTE[i % len(_PALETTE)] for i in range(len(_STATUS) - 2)] + ["#1b9e77", "#d62728"]


def _calls_svg(calls: Sequence[Call], tools: Sequence[ToolMark], lanes: list[str]) -> str:
    rows = [call_row(c) for c in calls]
    y = alt.Y("role:N", sort=lanes, title=None, scale=alt.Scale(domain=lanes))
    x = alt.X("start:Q", title="seconds since the run started", scale=alt.Scale(zero=False))
    color = alt.Color("status:N", title="call", scale=alt.Scale(domain=_STATUS, range=_COLORS))
    base = named("calls").encode(y=y, color=color)
    bars = (
        base.mark_bar(height=14, opacity=0.85)
        .encode(x=x, x2="end:Q", href="href:N")
        .properties(name="call_bars")
    )
    starts = base.mark_tick(thickness=2, size=16).encode(x=x)
    marked = (
        base.mark_point(filled=True, size=60, yOffset=-11)
        .encode(
            x=x,
            shape=alt.Shape(
                "status:N",
                legend=None,
                scale=alt.Scale(
                    domain=["repair", "retry", "refused", "error", "overrun", "lost"],
                    range=["diamond", "triangle-down", "cross", "square", "triangle-up", "circle"],
                ),
            ),
        )
        .transform_filter("datum.status != 'ok' && datum.status != 'replayed'")
    )
    chart = alt.layer(bars, starts, marked, *_tool_layers(x, y, color)).properties(
        width=900, height=max(80, 36 * len(lanes))
    )
    return to_svg(chart, {"calls": rows, "tools": [tool_row(t) for t in tools]})


def _tool_layers(x: alt.X, y: alt.Y, color: alt.Color) -> list[alt.Chart]:
    """A tool call under its role's model calls: a thin bar over its duration and a
    right-pointing triangle at its start (a shape no model call has), both linked."""
    base = named("tools").encode(y=y, color=color, href="href:N")
    span = (
        base.mark_bar(height=4, yOffset=12, opacity=0.9)
        .encode(x=x, x2="end:Q")
        .properties(name="tool_bars")
    )
    mark = (
        base.mark_point(shape="triangle-right", filled=True, size=90, yOffset=12, opacity=1)
        .encode(x=x)
        .properties(name="tool_marks")
    )
    return [span, mark]


def max_concurrency(calls: Sequence[Call]) -> int:
    """The most calls in flight at one moment."""
    edges = sorted(
        [(c.start, 1) for c in calls if c.end > c.start]
        + [(c.end, -1) for c in calls if c.end > c.start]
    )
    best = now = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best
