"""Reading a report page back in tests: the ``data-figure`` values of its header, the
exact costs of its tables, its data blocks, and how many marks each chart drew."""

from __future__ import annotations

import base64
import gzip
import json
import re
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any


class Page(HTMLParser):
    """``figures`` (name -> data-value), ``costs`` (group -> name -> Decimal cost) and the
    raw data blocks by element id."""

    def __init__(self, text: str):
        super().__init__()
        self.figures: dict[str, str] = {}
        self.costs: dict[str, dict[str, Decimal]] = {}
        self.blocks: dict[str, str] = {}
        self._group = self._row = self._block = None  # type: str | None
        self._text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "data-figure" in a:
            self.figures[a["data-figure"]] = a.get("data-value", "")
        if tag == "table" and "data-group" in a:
            self._group = a["data-group"]
            self.costs[self._group] = {}
        if tag == "tr" and self._group and f"data-{self._group}" in a:
            self._row = a[f"data-{self._group}"]
        if tag == "td" and self._group and self._row is not None and "data-value" in a:
            self.costs[self._group][self._row] = Decimal(a["data-value"])
        if tag == "script" and "id" in a:
            self._block, self._text = a["id"], []
            self._encoding = a.get("data-encoding", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._group = None
        if tag == "tr":
            self._row = None
        if tag == "script" and self._block:
            raw = "".join(self._text)
            if self._encoding == "gzip-base64":
                raw = gzip.decompress(base64.b64decode(raw)).decode()
            self.blocks[self._block] = raw
            self._block = None

    def handle_data(self, data: str) -> None:
        if self._block:
            self._text.append(data)

    def data(self, block: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = json.loads(self.blocks[block])
        return rows


def section(html: str, sid: str) -> str:
    start = html.index(f'<section id="{sid}">')
    return html[start : html.index("</section>", start)]


def marks(svg: str, name: str, element: str) -> int:
    """How many ``element``s the chart layer named ``name`` drew (Vega gives each layer's
    mark group the class ``<name>_marks``)."""
    count = 0
    for found in re.finditer(rf'<g class="mark-[a-z]+ role-mark {name}_marks"[^>]*>', svg):
        end = svg.index("</g>", found.end())  # a layer's marks are leaves: no nested groups
        count += len(re.findall(rf"<{element}[ /]", svg[found.end() : end]))
    return count
