"""``python -m sopbus.cli``: the same as the ``sopbus`` console script."""

from __future__ import annotations

from . import main

raise SystemExit(main())
