"""A griffe extension: sopbus's docstrings, written with Sphinx roles, read as links.

The docstrings cross-reference with Sphinx's roles (``:class:`~sopbus.bus.Budget```,
``:meth:`RunOutcome.open```, ``:mod:`._seal```) and end a paragraph before a literal block
with ``::``. Markdown knows neither. This extension rewrites each role, in the text that
mkdocstrings renders (the source is not touched), into an *optional* autorefs link: a link
where the API reference documents the target, plain code where it does not (a private
module, say). ``~`` shows the last part of the name only, as in Sphinx; a leading dot is
relative to the package of the docstring's module.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|exc|obj|const):`(?P<target>[^`]+)`")
_LITERAL = re.compile(r"(\S)::(\n\s*\n)")  # "text::" before a literal block -> "text:"
_CALLABLE = {"func", "meth"}


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring once its package is loaded."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None and ("`" in obj.docstring.value):
                obj.docstring.value = rewrite(obj.docstring.value, obj, loader.modules_collection)


def _walk(obj: griffe.Object) -> Any:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


def rewrite(text: str, obj: griffe.Object, collection: Any) -> str:
    def link(match: re.Match[str]) -> str:
        role, written = match[1], match["target"].strip()
        short = written.startswith("~")
        name = written.lstrip("~")
        identifier = _resolve(name, obj, collection)
        shown = name.rpartition(".")[2] if short else name.lstrip(".")
        if role in _CALLABLE:
            shown += "()"
        return f'<autoref identifier="{identifier}" optional><code>{shown}</code></autoref>'

    return _LITERAL.sub(r"\1:\2", _ROLE.sub(link, text))


def _resolve(name: str, obj: griffe.Object, collection: Any) -> str:
    """The full dotted path ``name`` means where ``obj``'s docstring writes it."""
    module = obj if obj.is_module else obj.module
    package = module.path if module.is_package else module.path.rpartition(".")[0]
    if name.startswith("."):
        base, rest = package, name[1:]
        while rest.startswith("."):
            base, rest = base.rpartition(".")[0], rest[1:]
        return f"{base}.{rest}"
    scopes = [obj.path] if obj.is_class else []
    if obj.parent is not None and obj.parent.is_class:
        scopes.append(obj.parent.path)
    scopes += [module.path, package, "sopbus", "sopbus.bus"]
    for scope in ("", *scopes):
        found = _found(f"{scope}.{name}" if scope else name, collection)
        if found is not None:
            return found
    return name


def _found(path: str, collection: Any) -> str | None:
    """The path of the object ``path`` names, where it is defined (an imported name
    leads to its definition: the API reference's pages are anchored there too)."""
    try:
        obj = collection.get_member(path)
    except Exception:  # not loaded, or no such member: either way not here
        return None
    if not obj.is_alias:
        return str(obj.path)
    try:
        return str(obj.final_target.path)
    except Exception:  # its module is not loaded (yet): the path it was imported from
        return str(obj.target_path)
