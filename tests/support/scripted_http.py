"""What the tests' model servers share (:mod:`support.openai_server`,
:mod:`support.anthropic_server`): a real HTTP server on 127.0.0.1 with a free port, on a
thread of its own, that answers requests from a script (the last reply repeats) and records
each request (path, headers, JSON body). Each server brings its own request handler, which
reads a request with :func:`received` and takes its reply with :meth:`ScriptedServer.take`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

R = TypeVar("R")


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def received(handler: BaseHTTPRequestHandler) -> Received:
    """The request ``handler`` is serving: its path, its headers (lower-cased names) and its
    JSON body (``{}`` when it has none)."""
    length = int(handler.headers.get("content-length", 0))
    body = json.loads(handler.rfile.read(length) or b"{}")
    return Received(handler.path, {k.lower(): v for k, v in handler.headers.items()}, body)


class ScriptedServer(Generic[R]):
    """The server, its script and its records. ``handler_for`` makes the request handler
    class of this server; ``root`` is what :attr:`base_url` adds to ``http://host:port``."""

    def __init__(
        self,
        first: R,
        handler_for: Callable[[Any], type[BaseHTTPRequestHandler]],
        *,
        root: str = "",
    ) -> None:
        self.requests: list[Received] = []
        self.elsewhere: list[Received] = []  # requests to paths the script does not answer
        self._root = root
        self._script: list[R] = [first]
        self._next = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a slow reply must not hold up shutdown
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}{self._root}"

    def script(self, *replies: R) -> None:
        """The replies to the next requests, in order; the last one repeats."""
        with self._lock:
            self._script, self._next = list(replies), 0

    def take(self, request: Received) -> R:
        """Records ``request`` and gives the reply the script has for it."""
        with self._lock:
            self.requests.append(request)
            reply = self._script[min(self._next, len(self._script) - 1)]
            self._next += 1
            return reply

    def pause(self, seconds: float) -> bool:
        """Waits ``seconds`` (a slow or dripping reply); True when the server is stopping
        meanwhile, and the reply should end."""
        return self._stopping.wait(seconds)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
