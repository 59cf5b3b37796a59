"""Imports every built-in role and action so that they are in ``roles.registry``.

The team builder imports this before it looks names up, so a scenario file can name a
built-in action (``watch = ["WriteCode"]``) without any SOP. Add a module here when you
add built-in roles.
"""

from __future__ import annotations
from . import _camel  # noqa: F401  (CAMEL role-play)

from . import _company_code  # noqa: F401  (Engineer and its actions)
from . import _company_docs  # noqa: F401  (PRD, design and task writers)
from . import _company_qa  # noqa: F401  (QA and its actions)
from . import _group_chat  # noqa: F401  (group chat)
from . import _code_run  # noqa: F401  (code-and-run pair)
from . import _book_workers  # noqa: F401  (blackboard book writer: board slots, workers, keeper)
from . import _book_doctor  # noqa: F401  (bounded book doctor)

from . import _gated  # noqa: F401  (gated writer: planner, writer, detector gate, publisher)
