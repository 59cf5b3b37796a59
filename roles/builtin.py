"""Imports every built-in role and action so that they are in ``roles.registry``.

The team builder imports this before it looks names up, so a scenario file can name a
built-in action (``watch = ["WriteCode"]``) without any SOP. Add a module here when you
add built-in roles.
"""

from __future__ import annotations
from . import _camel  # noqa: F401  (CAMEL role-play)
