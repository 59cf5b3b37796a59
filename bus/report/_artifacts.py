"""The run's artifacts for the page: Markdown rendered (markdown-it-py), code highlighted
(Pygments), images shown (inlined as ``data:`` URIs), anything else as text or a size.

Artifacts are written by models, so nothing in them may act: raw HTML in Markdown is
escaped, a Markdown image that points anywhere but a ``data:`` URI becomes a plain link
(the page must make no request), and an SVG is shown through ``<img>`` (no script runs).
"""

from __future__ import annotations

import base64
import html
from pathlib import Path, PurePosixPath
from typing import Any

from .. import _events as ev

MAX_TEXT = 200_000  # characters of one text artifact shown; the rest is cut with a note
MAX_TOTAL = 4_000_000  # bytes of artifacts inlined in one page; past it, listed only
_IMAGES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
}
_MARKDOWN = {".md", ".markdown"}


def render_artifacts(
    artifacts_dir: Path, written: dict[str, ev.ArtifactWritten]
) -> list[dict[str, Any]]:
    """One entry per artifact in the order first written: ``path``, ``role``, ``round``,
    ``size``, ``kind`` (``markdown``, ``code``, ``image``, ``binary``, ``missing`` or
    ``skipped``) and ``html`` (safe to place in the page)."""
    out, budget = [], MAX_TOTAL
    for path, event in written.items():
        file = artifacts_dir / PurePosixPath(path)
        entry = {"path": path, "role": event.role, "round": event.round, "size": event.size}
        if not file.is_file():
            entry |= {"kind": "missing", "html": "<p class=note>not in artifacts/ any more</p>"}
        elif event.size > budget:
            entry |= {
                "kind": "skipped",
                "html": f"<p class=note>not inlined: the page keeps at most "
                f"{MAX_TOTAL:,} bytes of artifacts</p>",
            }
        else:
            budget -= event.size
            entry |= _render(file, path)
        out.append(entry)
    return out


def _render(file: Path, path: str) -> dict[str, str]:
    suffix = file.suffix.lower()
    raw = file.read_bytes()
    if suffix in _IMAGES:
        data = base64.b64encode(raw).decode("ascii")
        return {
            "kind": "image",
            "html": f'<img alt="{html.escape(path)}" src="data:{_IMAGES[suffix]};base64,{data}">',
        }
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"kind": "binary", "html": f"<p class=note>binary, {len(raw):,} bytes</p>"}
    cut = len(text) > MAX_TEXT
    text = text[:MAX_TEXT]
    note = f"<p class=note>cut at {MAX_TEXT:,} characters</p>" if cut else ""
    if suffix in _MARKDOWN:
        return {"kind": "markdown", "html": f"<div class=md>{markdown(text)}</div>{note}"}
    return {"kind": "code", "html": highlight(text, path) + note}


def highlight(code: str, filename: str) -> str:
    """``code`` as highlighted HTML (Pygments, CSS classes under ``.hl``); the lexer is
    chosen by file name, plain text when none fits."""
    from pygments import highlight as pyg_highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_for_filename(filename, code)
    except ClassNotFound:
        lexer = TextLexer()
    result: str = pyg_highlight(code, lexer, HtmlFormatter(cssclass="hl"))
    return result


def highlight_css() -> str:
    """The Pygments style for :func:`highlight`'s output."""
    from pygments.formatters import HtmlFormatter

    css: str = HtmlFormatter(style="friendly").get_style_defs(".hl")
    return css


def markdown(text: str) -> str:
    """``text`` (CommonMark with tables) as HTML: raw HTML escaped, fenced code highlighted,
    images only from ``data:`` URIs."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "highlight": _fence}).enable("table")
    md.add_render_rule("image", _image)
    result: str = md.render(text)
    return result


def _fence(code: str, lang: str, _attrs: str) -> str:
    """A fenced block highlighted by its language name; "" lets markdown-it escape it."""
    from pygments import highlight as pyg_highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang.split()[0]) if lang.strip() else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""
    spans = pyg_highlight(code, lexer, HtmlFormatter(nowrap=True))
    return f'<pre class="hl"><code>{spans}</code></pre>'  # starts with <pre: used as is


def _image(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = html.escape(token.content or src)
    if src.startswith("data:image/"):
        return f'<img alt="{alt}" src="{html.escape(src)}">'
    return f"<span class=note>[image not loaded: {alt} ({html.escape(src)})]</span>"
