"""A stand-in for sopbus in the sandbox's attack tests: runs one script in the sandbox and
prints the result as JSON, then ``survived``. Run as its own process, so an attack on "the
parent" (a signal, a kill -9 of it) hits this process and not pytest.

    python tests/support/sandbox_driver.py BACKEND SCRIPT TIMEOUT_S [ARG...]

``{SOPBUS_PID}`` in the script is replaced by this process's pid.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trio

from sopbus.bus import SandboxLimits, SandboxSettings, run_sandboxed


async def main(backend: str, script: Path, timeout_s: float, args: list[str]) -> None:
    code = script.read_text().replace("{SOPBUS_PID}", str(os.getpid()))
    print("started", flush=True)
    result = await run_sandboxed(
        ["python", "attack.py", *args],
        files={"attack.py": code},
        limits=SandboxLimits(timeout_s=timeout_s),
        sandbox=SandboxSettings(backend=backend),  # type: ignore[arg-type]
    )
    print(
        json.dumps(
            {
                "exit_code": result.exit_code,
                "timed_out": result.timed_out,
                "stdout": result.stdout,
                "stderr": result.stderr,
            }
        ),
        flush=True,
    )
    print("survived", flush=True)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4:])
