"""The environment a sandboxed process starts with: built from nothing, never inherited."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

# Names that look like credentials. Broad on purpose (AUTH also refuses AUTHOR): a refused
# harmless name costs a rename, a leaked key costs money.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|^OPENAI_", re.I)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def refuse_secrets(env: Mapping[str, str]) -> None:
    """ValueError for a variable whose name looks like a credential, or is not a name."""
    for name in env:
        if _SECRET_NAME.search(name):
            raise ValueError(
                f"environment variable {name!r} looks like a secret and is not "
                f"passed to sandboxed code; generated code must not see API keys"
            )
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"environment variable name {name!r} is not valid")


def environment(*, home: str, tmp: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed variables, plus ``extra`` (checked by :func:`refuse_secrets`)."""
    env = {
        # The venv's bin first, so `python` and `pytest` are the ones sopbus runs with.
        "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{SYSTEM_PATH}",
        "HOME": home,
        "TMPDIR": tmp,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",  # a killed run still shows what it printed
        "MPLBACKEND": "Agg",  # plots go to files; there is no display
        # Each BLAS/OpenMP thread reserves address space; one thread keeps RLIMIT_AS meaningful.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update(extra)
    return env
