"""``sopbus a2a serve`` as a user starts it (a subprocess on a free port of 127.0.0.1), and
the official ``a2a-sdk`` client the tests talk to it with.

The server is ready when its Agent Card answers: :func:`serving` polls the card's URL (and
fails at once with the server's stderr if the process ends first), never sleeps a guess.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from support.cli import start
from support.nats_server import free_port

CARD_PATH = "/.well-known/agent-card.json"


@dataclass
class Served:
    """A running server: where it listens, its process, its runs directory."""

    url: str
    proc: subprocess.Popen[str]
    runs_dir: Path

    def stop(self) -> tuple[int, str]:
        """SIGINT (Ctrl-C), then its exit code and stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err


@contextmanager
def serving(
    scenario: Path | str, runs_dir: Path, *flags: str | Path, cwd: Path
) -> Iterator[Served]:
    """``sopbus a2a serve SCENARIO --port P --runs-dir RUNS_DIR FLAGS``, ready; stopped after."""
    port = free_port()
    proc = start(
        "a2a",
        "serve",
        scenario,
        "--port",
        str(port),
        "--runs-dir",
        runs_dir,
        *flags,
        cwd=cwd,
        text=True,
        stdout=subprocess.DEVNULL,
    )
    served = Served(f"http://127.0.0.1:{port}", proc, runs_dir)
    try:
        wait_ready(served)
        yield served
    finally:
        served.stop()


def wait_ready(served: Served, timeout: float = 120) -> None:
    """Returns once the card answers; raises with the server's stderr if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if served.proc.poll() is not None:
            raise AssertionError(f"the server exited {served.proc.returncode}: {served.stop()[1]}")
        try:
            if httpx.get(served.url + CARD_PATH, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # between two polls of the card, not a wait for readiness itself
    raise AssertionError(f"no Agent Card at {served.url} after {timeout} s")


@asynccontextmanager
async def client(url: str, *, streaming: bool, token: str | None = None) -> AsyncIterator[Any]:
    """The SDK's client for the agent at ``url`` (its card read first)."""
    from a2a.client import ClientConfig, create_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=120)
    made = await create_client(
        url,
        client_config=ClientConfig(streaming=streaming, httpx_client=http),
    )
    try:
        yield made
    finally:
        await made.close()
        await http.aclose()


def request(text: str, metadata: dict[str, Any] | None = None) -> Any:
    from a2a.helpers import new_text_message
    from a2a.types import Role, SendMessageRequest

    message = new_text_message(text, role=Role.ROLE_USER)
    made = SendMessageRequest(message=message)
    if metadata:
        made.metadata.update(metadata)
    return made


def as_dict(event: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    found: dict[str, Any] = MessageToDict(event)
    return found


def run(coroutine: Any) -> Any:
    """Runs an asyncio test body (the SDK is asyncio; the suite's async tests are trio)."""
    return asyncio.run(coroutine)
