"""The variables a run takes its keys and endpoints from, read once at the entry.

``sopbus`` and the Python API (:func:`sopbus.run_scenario`) read ``OPENAI_API_KEY`` and
``OPENAI_BASE_URL`` from the process environment and from a ``.env`` file in the working
directory (python-dotenv's format: ``KEY=value`` lines, ``#`` comments, quotes, ``export``).
A variable set in both keeps the environment's value, as python-dotenv does by default.

The file's values go into the mapping this returns and nowhere else: not into
``os.environ`` (so the sandbox and any subprocess never see them), not into the run
directory, not into the log. The engine reads only the mapping it is handed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from sopbus.bus import ConfigError

DOTENV = ".env"


def run_environ(
    cwd: Path | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``environ`` (default ``os.environ``) over the ``.env`` file in ``cwd`` (default the
    working directory), when there is one. An unreadable file is a
    :class:`~sopbus.bus.ConfigError` naming it."""
    path = (cwd or Path.cwd()) / DOTENV
    base = dict(os.environ if environ is None else environ)
    if not path.is_file():
        return base
    from dotenv import dotenv_values

    try:
        values = dotenv_values(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read {path}: {exc}; fix or remove the file "
            f"(it holds keys such as OPENAI_API_KEY=...)"
        ) from None
    # A line with a name and no `=` has no value (None): it sets nothing.
    return {**{k: v for k, v in values.items() if v is not None}, **base}
