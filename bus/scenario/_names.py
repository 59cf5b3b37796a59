"""What a role's name may be. A name is an address on the bus and also goes into file
names (an action's ``artifact = "{role}.md"``, a human's answer file), so a name that
reads as a path (``../../x``, ``/etc/x``, ``a\\b``, ``..``) or holds control characters is a
configuration error before the run, not a failure in round 3 after paid calls.
"""

from __future__ import annotations

import json

ROLE_NAME_FIX = 'use letters, digits, spaces, "-" or "_", e.g. "Writer"'


def role_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a role (one phrase), or ``None`` when it can."""
    shown = json.dumps(name)
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"role name {shown} holds a control character (NUL, newline, ...)"
    if "/" in name or "\\" in name:
        return f"role name {shown} holds a path separator (/ or \\)"
    if name.strip() in (".", ".."):
        return f"role name {shown} is a path component ({name.strip()})"
    return None
