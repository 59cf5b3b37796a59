"""MkDocs hook: the command-line reference, generated from the parser itself.

``docs/cli.md`` holds the marker ``<!-- sopbus-cli-reference -->``; this hook replaces it
with one section per command of :func:`sopbus.cli._app.build_parser`, in ``sopbus
--help``'s order: what the command does, its usage line, and every argument and option
with its help text. So the page cannot fall behind the command line: a new flag is on it at
the next build.
"""

from __future__ import annotations

import argparse
from typing import Any

MARKER = "<!-- sopbus-cli-reference -->"
WIDTH = 76  # usage lines wrapped alike on every machine, and within the page's column


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())


def reference() -> str:
    from sopbus.cli._app import build_parser

    parser = build_parser()
    sections = [_section(name, sub) for name, sub in subcommands(parser).items()]
    return "\n".join(sections)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name, in the order ``sopbus --help`` lists them."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _section(name: str, sub: argparse.ArgumentParser) -> str:
    sub.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
    formatter = sub._get_formatter()
    lines = [
        f"## {name}",
        "",
        _sentence(sub.description or ""),
        "",
        "```text",
        sub.format_usage().strip().removeprefix("usage: "),
        "```",
        "",
    ]
    rows = [
        (_names(action), _help(formatter, action))
        for action in sub._actions
        if action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)
    ]
    if rows:
        lines += ["| argument | what it does |", "|---|---|"]
        lines += [f"| {names} | {text} |" for names, text in rows]
        lines.append("")
    return "\n".join(lines)


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    shown = []
    for option in action.option_strings:
        if action.nargs == 0:
            shown.append(f"`{option}`")
        else:
            metavar = action.metavar or (
                "{" + ",".join(map(str, action.choices)) + "}"
                if action.choices
                else action.dest.upper()
            )
            shown.append(f"`{option} {metavar}`")
    return ", ".join(shown)


def _help(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    text = formatter._expand_help(action) if action.help else ""
    if action.required and action.option_strings:  # positionals are required anyway
        text = f"required; {text}"
    return _cell(text)


def _cell(text: str) -> str:
    """Help text as a table cell: one line, ``|`` escaped, and outside code spans ``[``
    and ``<`` escaped (``[llm].model`` is no link, ``<id>`` no tag)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("[", "\\[").replace("<", "&lt;")
    return "`".join(parts)


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""
