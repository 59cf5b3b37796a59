"""Imports every built-in role family so that its roles and actions are in ``sopbus.roles.registry``.

The team builder imports this before it looks names up, so a scenario file can name a
built-in action (``watch = ["WriteCode"]``) without any SOP. Add a family here when you
add built-in roles.
"""

from __future__ import annotations

from . import (
    book,  # noqa: F401  (blackboard book writer, bounded book doctor)
    chat,  # noqa: F401  (CAMEL role-play, group chat, code-and-run)
    company,  # noqa: F401  (PM, architect, project manager, engineer, QA)
    gated,  # noqa: F401  (gated writer: planner, writer, detector gate, publisher)
)
