"""``python -m sopbus``: the same as the ``sopbus`` console script."""

from __future__ import annotations

from sopbus.cli import main

raise SystemExit(main())
