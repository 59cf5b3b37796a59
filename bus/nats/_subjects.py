"""The names a run uses on NATS: its stream, its subjects, its consumers.

A run ``R`` has one stream ``SOPBUS_R`` that takes every subject under ``sopbus.R.>``:

* ``sopbus.R.act.<token(action)>``: the messages with no ``send_to``, by ``cause_by``;
* ``sopbus.R.to.<token(role)>``: one copy of an addressed message per recipient;
* ``sopbus.R.undelivered``: the addressed messages that reached nobody.

Role and action names are the user's (a scenario may call a role ``Product Manager`` or
``qa.lead``), so they go into a subject through :func:`token`: one subject token that is
also a valid consumer name (no ``.``, ``*``, ``>``, ``/``, ``\\``, whitespace, control
characters, never empty). Run ids are already safe (``YYYYmmdd-HHMMSS-slug-hex``).
"""

from __future__ import annotations

import re

_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ESCAPE = "~"  # not a plain character, so an escape can never be mistaken for one
_EMPTY = "~"  # a lone escape (an escape is otherwise always followed by two hex digits)
_ESCAPED = re.compile(r"~([0-9A-F]{2})")
_TOKEN = re.compile(r"(?:[A-Za-z0-9_-]|~[0-9A-F]{2})+")


def token(name: str) -> str:
    """``name`` as one NATS subject token; reversed by :func:`untoken`.

    Names made of ``[A-Za-z0-9_-]`` are kept as they are; every other character becomes
    ``~XX`` per byte of its UTF-8 (``qa.lead`` -> ``qa~2Elead``, ``Product Manager`` ->
    ``Product~20Manager``). The empty name is ``~``.
    """
    if not name:
        return _EMPTY
    if all(c in _PLAIN for c in name):
        return name
    return "".join(
        c if c in _PLAIN else "".join(f"{_ESCAPE}{b:02X}" for b in c.encode()) for c in name
    )


def untoken(tok: str) -> str:
    """The name that :func:`token` turned into ``tok``; a ``ValueError`` for any string
    :func:`token` cannot have made."""
    if tok == _EMPTY:
        return ""
    if not _TOKEN.fullmatch(tok):
        raise ValueError(
            f"{tok!r} is not a sopbus subject token (expected [A-Za-z0-9_-] "
            f"and ~XX escapes, as bus.nats._subjects.token makes them)"
        )
    if _ESCAPE not in tok:
        return tok
    raw = _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), tok).encode("latin-1")
    try:
        name = raw.decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{tok!r} escapes bytes that are not UTF-8") from exc
    if token(name) != tok:  # e.g. "~41" for "A": token() would have left it plain
        raise ValueError(f"{tok!r} is not how token() writes {name!r} (that is {token(name)!r})")
    return name


def stream_name(run_id: str) -> str:
    """The run's stream: ``SOPBUS_<run id>``."""
    return f"SOPBUS_{run_id}"


def run_subjects(run_id: str) -> str:
    """Every subject of the run (the stream's subject filter): ``sopbus.<run>.>``."""
    return f"sopbus.{run_id}.>"


def act_subject(run_id: str, action: str) -> str:
    """Where the messages caused by ``action`` with no ``send_to`` go."""
    return f"sopbus.{run_id}.act.{token(action)}"


def to_subject(run_id: str, role: str) -> str:
    """Where the copies of addressed messages for ``role`` go."""
    return f"sopbus.{run_id}.to.{token(role)}"


def undelivered_subject(run_id: str) -> str:
    """Where an addressed message that reached nobody goes (kept, as in the run log)."""
    return f"sopbus.{run_id}.undelivered"


def consumer_name(role: str) -> str:
    """The durable pull consumer that holds ``role``'s inbox: ``role-<token(role)>``."""
    return f"role-{token(role)}"


def turn_subject(run_id: str, role: str) -> str:
    """Where the coordinator asks ``role``'s host to take a turn (core NATS request/reply).
    Outside ``sopbus.<run>.>`` on purpose: the run's stream would store every request and
    answer it first, with its publish ack."""
    return f"sopbus-turn.{run_id}.{token(role)}"


def fx_subject(run_id: str, role: str) -> str:
    """Where ``role``'s host puts a turn's effects (calls, answers, artifacts, notes)."""
    return f"sopbus.{run_id}.fx.{token(role)}"


def fx_subjects(run_id: str) -> str:
    return f"sopbus.{run_id}.fx.>"
