"""Credentials out of what a run writes: a base URL may carry them
(``http://user:secret@host/v1``, ``...?api-key=secret``), and a run writes its URL into the
scenario it keeps, into errors, logs and the summary.

:func:`redact_url` gives the URL to show and record; :func:`url_secrets` the strings that
must not appear anywhere, so that a :class:`Redactor` can blank them, in every encoding a
server may echo them in (Basic auth's base64), in text that came from elsewhere (an HTTP
library's error that quotes the URL it was given, an answer that repeats the headers).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

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
    """``text`` with every one of ``secrets`` replaced by ``***`` (as given: a writer wants
    :class:`Redactor`, which knows their encodings too)."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def secret_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """Every form in which ``secrets`` may come back in what a server says: as given,
    percent-decoded and percent-encoded, and base64 (standard and urlsafe, padded or not) of
    each: an HTTP client sends a URL's ``user:password`` as Basic auth, and a server that
    echoes its headers echoes that. Longest first, so a form is blanked before a part of it."""
    plain = {form for s in secrets if s for form in (s, unquote(s))}
    forms = set(plain) | {quote(s, safe="") for s in plain}
    for s in plain:
        data = s.encode()
        for coded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
            forms |= {coded.decode(), coded.rstrip(b"=").decode()}
    return tuple(sorted((f for f in forms if len(f) >= 3), key=len, reverse=True))


class Redactor:
    """The one redaction step of everything a run writes (events, ledger, answers, the
    cassette, summary, scenario, run.log, stderr): blanks each of the run's secrets in all
    its :func:`secret_forms`, and, in JSON, also as escaped inside a string."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = tuple(s for s in secrets if s)
        self.forms = secret_forms(self.secrets)
        escaped = {
            json.dumps(form, ensure_ascii=ascii)[1:-1].encode()
            for form in self.forms
            for ascii in (True, False)
        } | {form.encode() for form in self.forms}
        self._raw = tuple(sorted(escaped, key=len, reverse=True))

    def __bool__(self) -> bool:
        return bool(self.forms)

    def text(self, text: str) -> str:
        """``text`` with every form of a secret replaced by ``***``."""
        return redact_text(text, self.forms)

    def data(self, data: bytes) -> bytes:
        """Encoded JSON lines ``data`` with every form of a secret replaced by ``***``; a
        secret inside a JSON string is blanked as written there, so the line stays valid."""
        for secret in self._raw:
            if secret in data:
                data = data.replace(secret, MASK.encode())
        return data
