"""The watch graph as the run saw it: who watches what (from ``role_joined``) and which
routes messages took (sender, ``cause_by``, recipient, from the deliveries).

Roles are placed in columns by their distance from the first senders (``Boss``), so a
pipeline reads left to right; an edge that runs back (a review loop, a chat) curves. Each
edge is labelled with its action and how many messages took it.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import altair as alt

from ._data import UNDELIVERED, RunData
from ._vega import named, to_svg

_COL_PX, _ROW_PX = 210, 90


def routes(data: RunData) -> Counter[tuple[str, str, str]]:
    """``(sender, cause_by, recipient)`` -> messages that took that route."""
    found: Counter[tuple[str, str, str]] = Counter()
    for posted in data.posted:
        m = posted.message
        for dst in posted.recipients or (UNDELIVERED,):
            found[(m.sent_from, m.cause_by, dst)] += 1
    return found


def _layers(nodes: list[str], edges: list[tuple[str, str, str]], team: list[str]) -> dict[str, int]:
    """Column of each node: breadth-first distance from the senders outside the team."""
    depth = {n: 0 for n in nodes if n not in team and n != UNDELIVERED}
    frontier = list(depth)
    while frontier:
        nxt = []
        for src in frontier:
            for a, _, b in edges:
                if a == src and b not in depth:
                    depth[b] = depth[src] + 1
                    nxt.append(b)
        frontier = nxt
    last = max(depth.values(), default=0)
    return {n: depth.get(n, last + 1) for n in nodes}


def graph_svg(data: RunData) -> str:
    """The graph (see the module docstring) as SVG."""
    counted = routes(data)
    team = [r.name for r in data.roles]
    nodes = list(dict.fromkeys([*data.lanes(), *(d for _, _, d in counted)]))
    col = _layers(nodes, list(counted), team)
    rows_in: Counter[int] = Counter()
    pos: dict[str, tuple[float, float]] = {}
    for n in nodes:
        pos[n] = (col[n] * _COL_PX, rows_in[col[n]] * _ROW_PX)
        rows_in[col[n]] += 1
    node_rows = [{"x": x, "y": y, "name": n, "kind": _kind(n, team)} for n, (x, y) in pos.items()]
    lines, heads, labels = _edges(counted, pos)
    width = (max(col.values(), default=0) + 1) * _COL_PX
    height = max(rows_in.values(), default=1) * _ROW_PX
    return to_svg(
        _chart(width, height),
        {"nodes": node_rows, "lines": lines, "heads": heads, "labels": labels},
    )


def _kind(name: str, team: list[str]) -> str:
    return "role" if name in team else "nobody" if name == UNDELIVERED else "outside"


def _edges(
    counted: Counter[tuple[str, str, str]], pos: dict[str, tuple[float, float]]
) -> tuple[list[Any], ...]:
    lines: list[dict[str, Any]] = []
    heads: list[dict[str, Any]] = []
    labels: list[dict[str, Any]] = []
    pair_seen: Counter[tuple[str, str]] = Counter()
    for i, ((src, action, dst), n) in enumerate(counted.items()):
        (x0, y0), (x1, y1) = pos[src], pos[dst]
        k = pair_seen[(src, dst)]
        pair_seen[(src, dst)] += 1
        bend = 28.0 * (k + 1) if x1 <= x0 else 18.0 * k  # back and same-column edges curve
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        length = math.hypot(x1 - x0, y1 - y0) or 1.0
        cx, cy = (
            mx - (y1 - y0) / length * bend,
            my + (x1 - x0) / length * bend - (bend if x1 == x0 and y1 == y0 else 0),
        )
        for order, (x, y) in enumerate(((x0, y0), (cx, cy), (x1, y1))):
            lines.append({"edge": i, "order": order, "x": x, "y": y})
        hx, hy = 0.25 * cx + 0.75 * x1, 0.25 * cy + 0.75 * y1
        angle = math.degrees(math.atan2(y1 - cy, x1 - cx)) + 90  # Vega's triangle points up
        heads.append({"x": hx, "y": hy, "angle": angle})
        labels.append({"x": cx, "y": cy, "text": f"{action} ×{n}" if n > 1 else action})  # noqa: RUF001 (a times sign)
    return lines, heads, labels


def _chart(width: int, height: int) -> alt.TopLevelMixin:
    """The layers on a scale of one unit per pixel, so the arrowheads' angles are true."""
    w_px, h_px = max(320, width - _COL_PX + 140), max(120, height - _ROW_PX + 70)
    pad_x, pad_y = (w_px - (width - _COL_PX)) / 2, (h_px - (height - _ROW_PX)) / 2
    x = alt.X(
        "x:Q",
        axis=None,
        scale=alt.Scale(domain=[-pad_x, width - _COL_PX + pad_x], nice=False, zero=False),
    )
    y = alt.Y(
        "y:Q",
        axis=None,
        scale=alt.Scale(
            domain=[-pad_y, height - _ROW_PX + pad_y], nice=False, zero=False, reverse=True
        ),
    )
    line = (
        named("lines")
        .mark_line(interpolate="basis", color="#8a94a6")
        .encode(x=x, y=y, detail="edge:N", order="order:Q")
    )
    head = (
        named("heads")
        .mark_point(shape="triangle", filled=True, size=80, color="#8a94a6")
        .encode(x=x, y=y, angle=alt.Angle("angle:Q", scale=None))
    )
    label = (
        named("labels").mark_text(fontSize=10, color="#333", dy=-6).encode(x=x, y=y, text="text:N")
    )
    node = (
        named("nodes")
        .mark_point(filled=True, size=2200, shape=_BOX, opacity=1, stroke="#5b6b85", strokeWidth=1)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "kind:N",
                legend=None,
                scale=alt.Scale(
                    domain=["role", "outside", "nobody"], range=["#dbe7f7", "#e8f4e4", "#fbe3e3"]
                ),
            ),
        )
    )
    name = named("nodes").mark_text(fontSize=12, fontWeight="bold").encode(x=x, y=y, text="name:N")
    return alt.layer(line, head, label, node, name).properties(width=w_px, height=h_px)


# A wide box for a role's name (Vega scales a custom shape's unit square by the mark's size).
_BOX = "M-1.5,-0.4H1.5V0.4H-1.5Z"
