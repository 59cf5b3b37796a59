"""Vega-Lite charts (built with altair) rendered to inline SVG by vl-convert, offline.

vl-convert runs Vega in an embedded JavaScript engine inside its wheel: no browser, no
network, and the page that shows the SVG needs no script at all to draw it. The data of a
chart goes in as a named dataset after the spec is built, so altair validates the grammar
of each chart (a small document) without walking thousands of data rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt

# Vega resolves a mark's href against its loader's base URL (vl-convert's points at a
# public host); links in the report are in-page anchors, so the base is cut off again.
_HREF = re.compile(r'xlink:href="[^"#]*#')
_CONFIG: dict[str, Any] = {
    "font": "sans-serif",
    # No aria-label per mark: it repeats each mark's data and doubles a big chart's size;
    # the page's tables and the detail panel carry the same facts.
    "aria": False,
    "view": {"stroke": "#ddd"},
    "axis": {"labelFontSize": 11, "titleFontSize": 11},
    "legend": {"labelFontSize": 11, "titleFontSize": 11},
}


def to_svg(chart: alt.TopLevelMixin, data: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """``chart`` as an SVG document, with ``data`` as its named datasets
    (``alt.Data(name=...)`` in the chart)."""
    import vl_convert

    spec = chart.to_dict(validate=True)
    spec["datasets"] = {name: list(rows) for name, rows in data.items()}
    svg: str = vl_convert.vegalite_to_svg(spec, config=_CONFIG)
    return _HREF.sub('xlink:href="#', svg)


def named(name: str) -> alt.Chart:
    """A chart on the named dataset ``name``."""
    return alt.Chart(alt.Data(name=name))


def lane_axis(lanes: Sequence[str], field: str, *, title: str | None = None) -> alt.Y:
    """A y encoding of lane numbers (0 at the top) labelled with the lanes' names. Lanes are
    numbers rather than a nominal scale because arrows need ``y2``, which a band scale
    cannot take."""
    import json

    names = json.dumps(list(lanes))
    return alt.Y(
        f"{field}:Q",
        title=title,
        scale=alt.Scale(domain=[-0.5, len(lanes) - 0.5], reverse=True, nice=False, zero=False),
        axis=alt.Axis(
            values=list(range(len(lanes))),
            labelExpr=f"{names}[datum.value]",
            grid=True,
            gridDash=[2, 3],
            tickCount=len(lanes),
            labelLimit=160,
        ),
    )


def pages(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` in runs of at most ``size`` (at least one page, maybe empty)."""
    return [items[i : i + size] for i in range(0, len(items), size)] or [items[:0]]
