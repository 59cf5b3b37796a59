"""Assembling the report: one HTML file with everything inline and a Content Security
Policy that forbids every request (``default-src 'none'``; images only from ``data:``;
the one script allowed by its hash), so the page opens offline and cannot phone anywhere
even if a model's text tried to make it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from .._summary import RunSummary
from ..money import cost_report
from ._artifacts import highlight_css, render_artifacts
from ._crowd import CALLS_DRAWN, calls_by_round, crowds, population_section
from ._data import Call, Posted, RunData, ToolMark, read_run
from ._flow import call_pages, flow_pages, max_concurrency
from ._graph import graph_svg, routes
from ._header import artifact_id, cost_tables, evidence, figures, header_html
from ._money import breakdown_svg, spend_svg
from ._tools import tool_spend_html

REPORT_FILE = "report.html"
_MAX_LISTED = 300  # rows of the undelivered and role-event lists; the rest is counted
_PLAIN_MAX = 256_000  # characters of JSON kept readable in the page; bigger blocks are packed
_MESSAGES_MAX = 4_000_000  # packed bytes of message data; past it, contents are cut


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """Writes the report of the run in ``run_dir`` to ``out`` (default
    ``run_dir/report.html``) and returns its path."""
    target = out if out is not None else run_dir / REPORT_FILE
    page = build_report(run_dir)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(target)  # a browser never opens half a report
    return target


def build_report(run_dir: Path) -> str:
    """The report of the run in ``run_dir`` as one HTML document."""
    data = read_run(run_dir)
    names = crowds(data)
    report = cost_report([c.line for c in data.calls], run_id=run_dir.name, crowds=names)
    fig = figures(data, report)
    sections = [
        *([("populations", "Populations", population_section(data))] if names else []),
        ("flow", "Message flow", _flow_section(data)),
        ("money", "Money", _money_section(data, report, fig)),
        ("calls", "Calls timeline", _calls_section(data)),
        ("graph", "Watch graph", _graph_section(data)),
        ("artifacts", "Artifacts", _artifacts_section(data, evidence(fig, data))),
        ("notes", "Role events", _notes_section(data)),
    ]
    body = "".join(
        f'<section id="{sid}"><h2>{title}</h2>{html}</section>' for sid, title, html in sections
    )
    nav = "".join(f'<a href="#{sid}">{title}</a>' for sid, title, _ in sections)
    payload = _messages_block(data.posted)
    payload += _json_block("calls-data", [_call_detail(c) for c in _detailed(data.calls)])
    payload += _json_block("tools-data", [_tool_detail(t) for t in data.tools])
    return _document(
        f"sopbus report: {fig.scenario} {fig.run_id}",
        f"<nav>{nav}</nav><main>{header_html(fig, data)}{body}</main>{_DETAIL}{payload}",
    )


_DETAIL = (
    '<aside id="detail" hidden><button id="detail-close" type="button">close</button>'
    '<div id="detail-body"></div></aside><div id="tip" role="tooltip" hidden></div>'
)


def _document(title: str, body: str, *, scripted: bool = True) -> str:
    """The page around ``body``; ``scripted=False`` (a page with nothing to click open)
    carries no script, and its policy allows none."""
    script = _static("report.js") if scripted else ""
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    allowed = f"'sha256-{digest}'" if scripted else "'none'"
    csp = (
        f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src {allowed}; base-uri 'none'; form-action 'none'"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_static('report.css')}{highlight_css()}</style>"
        f"</head><body>{body}{f'<script>{script}</script>' if scripted else ''}</body></html>\n"
    )


def _static(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def _json_block(element_id: str, rows: list[dict[str, Any]]) -> str:
    """``rows`` as a data block the page's script reads on first use: plain JSON when small,
    gzip + base64 when big (the browser inflates it with its own DecompressionStream)."""
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    if len(text) < _PLAIN_MAX:
        safe = text.replace("<", "\\u003c")  # no text can close the script element
        return f'<script type="application/json" id="{element_id}">{safe}</script>'
    return f'<script type="application/octet-stream" data-encoding="gzip-base64" id="{element_id}">{_packed(text)}</script>'


def _packed(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode(
        "ascii"
    )


def _messages_block(posted: list[Posted]) -> str:
    """Every message whole, unless that passes :data:`_MESSAGES_MAX` packed bytes: then
    each content is cut to an equal share, and the panel says so (``sopbus show RUN
    --json`` prints them whole)."""
    rows = [_message_row(p) for p in posted]
    block = _json_block("messages-data", rows)
    if len(block) <= _MESSAGES_MAX:
        return block
    # Packed text is smaller than raw text, so raw contents within the budget surely fit.
    share = max(200, _MESSAGES_MAX // max(len(rows), 1) - 100)
    for row in rows:
        if len(row["content"]) > share:
            row["cut"] = len(row["content"]) - share
            row["content"] = row["content"][:share]
    return _json_block("messages-data", rows)


def _message_row(p: Posted) -> dict[str, Any]:
    m = p.message
    return {
        "id": m.id,
        "round": m.round,
        "from": m.sent_from,
        "to": list(p.recipients),
        "cause_by": m.cause_by,
        "content": m.content,
        "payload": m.payload,
        "parents": list(m.parents),
        "undelivered": p.reason,
        "t": round(p.t, 4),
    }


def _detailed(calls: list[Call]) -> list[Call]:
    """The calls whose ledger lines the page carries: all of them, or past
    :data:`CALLS_DRAWN` (drawn as counts) those that did not end ``ok``, at most that many."""
    if len(calls) <= CALLS_DRAWN:
        return calls
    return [c for c in calls if c.line.outcome not in ("ok", "replayed")][:CALLS_DRAWN]


def _call_detail(call: Any) -> dict[str, Any]:
    import msgspec

    line = msgspec.to_builtins(call.line)  # money as decimal strings
    return {**line, "mark": call.mark, "start_s": round(call.start, 4), "end_s": round(call.end, 4)}


def _tool_detail(mark: ToolMark) -> dict[str, Any]:
    """A tool call for the page's tooltip and panel: its event's fields, when and where."""
    return {
        "n": mark.n,
        "round": mark.round,
        "role": mark.role,
        "name": mark.name,
        **mark.data,
        "start_s": round(mark.start, 4),
        "end_s": round(mark.end, 4),
    }


def _pager(pages: list[tuple[str, str]], what: str) -> str:
    """The first page drawn; the others packed (gzip + base64) until chosen, so a big run's
    hundreds of thousands of SVG nodes are neither downloaded as text nor laid out at load."""
    first = f'<div class="page-view chart">{pages[0][1]}</div>'
    if len(pages) == 1:
        return f"<div data-pager>{first}</div>"
    options = "".join(
        f'<option value="{i}">{escape(label)}</option>' for i, (label, _) in enumerate(pages)
    )
    rest = "".join(
        f'<script type="application/octet-stream" data-encoding="gzip-base64" data-page>'
        f"{_packed(svg)}</script>"
        for _, svg in pages[1:]
    )
    return (
        f"<div data-pager><label>{len(pages)} pages of {what}: <select>{options}</select></label>"
        f"{first}{rest}</div>"
    )


def _flow_section(data: RunData) -> str:
    undelivered = [p for p in data.posted if p.reason is not None]
    axis = (
        "time since the run started" if data.mode == "events" else "publish order, banded by round"
    )
    intro = (
        f"<p class=note>{len(data.posted):,} messages; roles are lanes, the axis is {axis}; "
        f"one arrow per delivery, coloured by cause_by and labelled where the label fits; "
        f"click a mark to read the message.</p>"
    )
    return intro + _pager(flow_pages(data), "the message flow") + _undelivered_list(undelivered)


def _undelivered_list(undelivered: list[Posted]) -> str:
    if not undelivered:
        return "<p class=note>every message reached a role</p>"
    rows = "".join(
        f'<tr><td><a href="#msg-{escape(p.message.id)}">{escape(p.message.id)}</a></td>'
        f"<td>{p.message.round}</td><td>{escape(p.message.sent_from)}</td>"
        f"<td>{escape(p.message.cause_by)}</td><td>{escape(p.reason or '')}</td></tr>"
        for p in undelivered[:_MAX_LISTED]
    )
    more = (
        f"<p class=note>and {len(undelivered) - _MAX_LISTED:,} more</p>"
        if len(undelivered) > _MAX_LISTED
        else ""
    )
    return (
        f'<h3 data-figure="undelivered_listed" data-value="{len(undelivered)}">undelivered: '
        f"{len(undelivered):,}</h3><table class=list><tr><th>id</th><th>round</th><th>from</th>"
        f"<th>cause_by</th><th>why</th></tr>{rows}</table>{more}"
    )


def _money_section(data: RunData, report: dict[str, Any], fig: RunSummary) -> str:
    budget = fig.budget_usd
    if not data.calls:
        return "<p class=note>no LLM calls: nothing was spent</p>"
    return (
        f"<div class=chart>{spend_svg(data.calls, budget, crowds(data))}</div>"
        f"<div class=chart>{breakdown_svg(report)}</div>{cost_tables(report)}"
        f"{tool_spend_html(data)}"
    )


def _calls_section(data: RunData) -> str:
    calls = data.llm_calls
    if not calls and not data.tools:
        return "<p class=note>no LLM calls</p>"
    marks = {m: sum(c.mark == m for c in calls) for m in ("retry", "repair")}
    refused = sum(c.line.outcome == "refused" for c in calls)
    most = max_concurrency(calls)
    failed = sum(bool(t.data.get("error")) for t in data.tools)
    tools = (
        f'<span data-figure="tool_calls" data-value="{len(data.tools)}">'
        f"{_count(len(data.tools), 'tool call')}</span> ({failed} with an error result) "
        f"drawn as triangles under the model calls; point at one for its tool, arguments, "
        f"duration, result size and cost. "
        if data.tools
        else ""
    )
    intro = (
        f"<p class=note>{_count(len(calls), 'model call')}; at most "
        f'<span data-figure="max_concurrency">{most}</span> {"call" if most == 1 else "calls"} '
        f"in flight at once; {_count(marks['retry'], 'retry', 'retries')}, "
        f"{_count(marks['repair'], 'repair')}, {refused} refused. {tools}"
        f"Click a bar or a triangle to read its ledger line or tool call.</p>"
    )
    if len(calls) > CALLS_DRAWN:
        return intro + _many_calls(data)
    return intro + _pager(call_pages(data), "calls")


def _many_calls(data: RunData) -> str:
    """Too many calls for a bar each: counts per round and role (see :data:`CALLS_DRAWN`)."""
    kept = len(_detailed(data.calls))
    return (
        f'<p class=note data-figure="calls_aggregated" data-value="{CALLS_DRAWN}">More than '
        f"{CALLS_DRAWN:,} model calls: drawn as counts per round and role, not a bar each; "
        f"the page keeps the ledger lines of {_count(kept, 'call')} that did not end ok "
        f"(<code>sopbus costs RUN</code> and the run's ledger have every line).</p>"
        f"{calls_by_round(data.llm_calls, crowds(data))}"
    )


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


def _graph_section(data: RunData) -> str:
    rows = "".join(
        f"<tr><td>{escape(r.name)}</td><td>{escape(', '.join(r.aliases))}</td>"
        f"<td>{escape(', '.join(r.watch) or '-')}</td></tr>"
        for r in data.roles
    )
    counted = routes(data)
    route_rows = "".join(
        f"<tr><td>{escape(a)}</td><td>{escape(c)}</td><td>{escape(b)}</td><td>{n}</td></tr>"
        for (a, c, b), n in counted.items()
    )
    return (
        f"<div class=chart>{graph_svg(data)}</div><div class=tables>"
        f"<table class=list><caption>who watches what</caption><tr><th>role</th><th>aliases</th>"
        f"<th>watches</th></tr>{rows}</table><table class=list><caption>routes taken</caption>"
        f"<tr><th>from</th><th>cause_by</th><th>to</th><th>messages</th></tr>{route_rows}</table></div>"
    )


def _artifacts_section(data: RunData, proof: str) -> str:
    """Every artifact, the first three open; the one the verdict rests on first and open."""
    entries = render_artifacts(data.run_dir / "artifacts", data.artifacts)
    if not entries:
        return "<p class=note>the run wrote no artifacts</p>"
    entries.sort(key=lambda e: e["path"] != proof)  # stable: the others keep their order
    items = "".join(
        f'<details class=artifact id="{escape(artifact_id(e["path"]))}" data-kind="{e["kind"]}"'
        f"{' open' if i < 3 else ''}><summary>{escape(e['path'])} <span class=note>"
        f"({e['kind']}, {e['size']:,} bytes, by {escape(e['role'])} in round {e['round']}"
        f"{'; the verdict rests on it' if e['path'] == proof else ''})</span></summary>"
        f"{e['html']}</details>"
        for i, e in enumerate(entries)
    )
    return f"<p class=note>{len(entries)} files in artifacts/</p>{items}"


def _notes_section(data: RunData) -> str:
    if not data.notes:
        return "<p class=note>the roles recorded no events of their own</p>"
    rows = "".join(
        f"<tr><td>{escape(str(n.get('kind')))}</td><td>{n.get('round', '')}</td>"
        f"<td>{escape(str(n.get('role', '')))}</td><td><code>"
        f"{escape(json.dumps(n.get('data', {}), ensure_ascii=False)[:300])}</code></td></tr>"
        for n in data.notes[:_MAX_LISTED]
    )
    more = (
        f"<p class=note>and {len(data.notes) - _MAX_LISTED:,} more</p>"
        if len(data.notes) > _MAX_LISTED
        else ""
    )
    return (
        f"<details><summary>{len(data.notes):,} events the roles recorded (tests run, reviews, "
        f"gates...)</summary><table class=list><tr><th>kind</th><th>round</th><th>role</th>"
        f"<th>data</th></tr>{rows}</table>{more}</details>"
    )
