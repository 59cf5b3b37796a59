"""Where a run's secrets show up: every form a server may echo them in, searched in files.

``secret_forms(user, password, key)`` gives the key, the password as given and
percent-encoded, and the Basic auth of ``user:password`` (base64, standard and urlsafe,
padded and not); :func:`leaks` searches files and texts for them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import quote


def basic(pair: str) -> list[str]:
    """Base64 of ``pair`` as Basic auth sends it, and its urlsafe and unpadded variants."""
    std, safe = base64.b64encode(pair.encode()), base64.urlsafe_b64encode(pair.encode())
    return [form.decode() for form in (std, safe, std.rstrip(b"="), safe.rstrip(b"="))]


def secret_forms(user: str, password: str, key: str) -> list[str]:
    return [key, password, quote(password, safe=""), *basic(f"{user}:{password}")]


def leaks(
    forms: Iterable[str], roots: Iterable[Path], texts: Mapping[str, str | bytes] = {}
) -> dict[str, list[str]]:
    """Each file under ``roots`` (or ``roots`` itself, a file) and each of ``texts`` that
    holds one of ``forms``, with the forms it holds; ``{}`` when none does."""
    forms = list(forms)
    found: dict[str, list[str]] = {}
    files = [p for root in roots for p in ([root] if root.is_file() else root.rglob("*"))]
    named = {str(p): p.read_bytes() for p in files if p.is_file()}
    for where, data in {**named, **texts}.items():
        raw = data.encode() if isinstance(data, str) else data
        hits = [form for form in forms if form.encode() in raw]
        if hits:
            found[where] = hits
    return found
