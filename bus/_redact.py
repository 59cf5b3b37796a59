"""Credentials out of what a run writes: a base URL may carry them
(``http://user:secret@host/v1``, ``...?api-key=secret``), and a run writes its URL into the
scenario it keeps, into errors, logs and the summary.

:func:`redact_url` gives the URL to show and record; :func:`url_secrets` the strings that
must not appear anywhere, so that :func:`redact_text` can blank them in text that came from
elsewhere (an HTTP library's error that quotes the URL it was given).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"
_KEYLIKE = re.compile(
    r"(?i)(^|[-_.])(api[-_]?key|key|token|access[-_]?token|secret|password|"
    r"passwd|pwd|auth|authorization|sig|signature|credential|credentials|"
    r"session|code)$"
)


def is_keylike(name: str) -> bool:
    """Whether a query parameter named ``name`` carries a credential (``api-key``,
    ``access_token``, ``sig``...)."""
    return bool(_KEYLIKE.search(name))


def redact_url(url: str) -> str:
    """``url`` with its user info and key-like query values replaced by ``***``; a string
    that is not a URL with a scheme and host is returned unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = (
        "&".join(
            f"{k}={MASK}" if is_keylike(k) else piece
            for piece in parts.query.split("&")
            if piece
            for k in [piece.split("=", 1)[0]]
        )
        if parts.query
        else ""
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credential strings inside ``url``: the user info (and its password alone, in
    raw and decoded form) and the values of key-like query parameters."""
    if not url:
        return ()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        found.append(userinfo)
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
        if parts.password:
            found.append(parts.password)
    for raw in parts.query.split("&"):
        name, _, value = raw.partition("=")
        if value and is_keylike(name):
            found.append(value)
    found += [v for k, v in parse_qsl(parts.query) if v and is_keylike(k)]
    return tuple(sorted({s for s in found if len(s) >= 3}, key=len, reverse=True))


def redact_text(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every one of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text
