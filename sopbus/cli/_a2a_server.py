"""The one door to the ``a2a-sdk`` server for ``sopbus a2a serve``: the SDK's JSON-RPC
routes and Agent Card route on Starlette, served by uvicorn, with an executor whose tasks
are sopbus runs (:mod:`._a2a_tasks`).

The SDK does the protocol (``SendMessage``, ``SendStreamingMessage`` over SSE, ``GetTask``,
``CancelTask``, the ``A2A-Version`` check, JSON-RPC errors for unknown methods and bad
params); this module adds what a server open to callers needs around it: a bearer token
checked in constant time, a cap on the size of a request (read before the SDK parses it),
and SDK log lines without tracebacks (a caller's bad request is not our bug).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import uvicorn
from a2a.helpers import new_raw_part, new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import InvalidParamsError, TaskNotCancelableError, TaskState
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, DEFAULT_RPC_URL

from sopbus.bus import ConfigError

from ._a2a_tasks import Desk, Refused, TaskRun

MAX_REQUEST_BYTES = 1 << 20
"""The largest request body accepted (1 MiB): an idea is text, and a bigger body would be
held in memory whole before it could be refused."""
MAX_ARTIFACT_BYTES = 1 << 20
"""A run's file larger than this is named in the task's metadata instead of sent."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class ServeSettings:
    """What ``sopbus a2a serve`` was started with."""

    scenario: Path
    host: str
    port: int
    max_budget: Decimal
    max_total: Decimal
    runs_dir: Path
    token: str | None = None
    model: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{DEFAULT_RPC_URL}"


class RunExecutor(AgentExecutor):
    """Each task is one run of the scenario, its idea the message's text."""

    def __init__(self, desk: Desk):
        self.desk = desk
        self._by_task: dict[str, tuple[TaskRun, TaskUpdater]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        try:
            run = self.desk.accept(context.get_user_input(), context.metadata)
        except Refused as refusal:
            # The SDK logs the error this becomes as "Execution failed"; this line says why.
            print(f"sopbus a2a: refused a task: {refusal}", file=sys.stderr, flush=True)
            raise InvalidParamsError(message=str(refusal)) from None
        updater = TaskUpdater(event_queue, task_id, context_id)
        self._by_task[task_id] = (run, updater)
        task = new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED)
        if context.message is not None:
            task.history.append(context.message)
        task.metadata.update(_started(run))
        await event_queue.enqueue_event(task)
        await updater.start_work(self._said(updater, f"run {run.run_id} started"))
        try:
            await self._follow(run, updater)
        except asyncio.CancelledError:
            # The server is closing (a CancelTask has ended the run already): the run ends
            # cancelled, its summary written, before this task lets go.
            self.desk.cancel(run)
            await _wait_out(run)
            raise

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        found = self._by_task.get(context.task_id or "")
        if found is None:
            raise TaskNotCancelableError(message="this task has no run on this server")
        run, updater = found
        self.desk.cancel(run)
        await _wait_out(run)
        await self._finish(run, updater)

    async def _follow(self, run: TaskRun, updater: TaskUpdater) -> None:
        """Status updates with the run's progress until it ends, then its files and end."""
        assert run.ended is not None
        while not run.ended.done():
            next_update = asyncio.ensure_future(run.updates.get())
            waited: set[asyncio.Future[Any]] = {next_update, run.ended}
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
            if not next_update.done():
                next_update.cancel()
                break
            progress = next_update.result()
            if not run.closed:
                await updater.update_status(
                    TaskState.TASK_STATE_WORKING,
                    self._said(updater, progress.text()),
                    metadata={"sopbus": {"run_id": run.run_id, **progress.data()}},
                )
        await self._finish(run, updater)

    async def _finish(self, run: TaskRun, updater: TaskUpdater) -> None:
        """The run's files as artifacts and its terminal state, once (a cancel and the
        run's end may both get here)."""
        if run.closed:
            return
        run.closed = True
        assert run.ended is not None
        ended = run.ended.result()
        if isinstance(ended, BaseException):
            await updater.failed(self._said(updater, _failure(run, ended)))
            return
        skipped = await self._artifacts(run, updater)
        state = {
            "completed": TaskState.TASK_STATE_COMPLETED,
            "cancelled": TaskState.TASK_STATE_CANCELED,
        }.get(ended.status, TaskState.TASK_STATE_FAILED)
        await updater.update_status(
            state,
            self._said(updater, _ending(ended)),
            metadata={"sopbus": {**_result(ended), "artifacts_not_sent": skipped}},
        )

    async def _artifacts(self, run: TaskRun, updater: TaskUpdater) -> list[str]:
        """Sends each file of the run's ``artifacts/``; the names of those too big to."""
        root = run.run_dir / "artifacts"
        skipped: list[str] = []
        # Links are not followed: a file the run could point at (/etc/passwd) never leaves.
        found = root.rglob("*") if root.is_dir() else ()
        files = sorted(p for p in found if p.is_file() and not _linked(p, root))
        for path in files:
            name = path.relative_to(root).as_posix()
            if path.stat().st_size > MAX_ARTIFACT_BYTES:
                skipped.append(name)
                continue
            data = path.read_bytes()
            try:
                part = new_text_part(data.decode("utf-8"), media_type="text/plain")
            except UnicodeDecodeError:
                part = new_raw_part(data, media_type="application/octet-stream", filename=name)
            await updater.add_artifact([part], name=name, last_chunk=True)
        return skipped

    @staticmethod
    def _said(updater: TaskUpdater, text: str) -> Any:
        return new_text_message(text, context_id=updater.context_id, task_id=updater.task_id)


def _linked(path: Path, root: Path) -> bool:
    """Whether ``path`` or a folder between it and ``root`` is a symbolic link."""
    return any(p.is_symlink() for p in (path, *path.parents) if p != root and root in p.parents)


async def _wait_out(run: TaskRun) -> None:
    """Waits for ``run`` to end even if the waiting task is cancelled meanwhile."""
    assert run.ended is not None
    while not run.ended.done():
        try:
            await asyncio.shield(run.ended)
        except asyncio.CancelledError:
            continue


def _started(run: TaskRun) -> dict[str, Any]:
    return {"sopbus": {"run_id": run.run_id, "budget_usd": str(run.budget)}}


def _result(ended: Any) -> dict[str, Any]:
    import msgspec

    return {
        "run_id": ended.run_id,
        "status": ended.status,
        "end_reason": ended.end_reason,
        "spent_usd": str(ended.total_usd),
        "budget_usd": str(ended.budget_usd),
        "verdict": msgspec.to_builtins(ended.verdict),
        "ok": ended.ok,
        "rounds": ended.rounds,
        "llm_calls": ended.llm_calls,
        "run_dir": str(ended.run_dir),
    }


def _ending(ended: Any) -> str:
    from sopbus.bus.money import money

    spent = f"spent {money(ended.total_usd)} of {money(ended.budget_usd)}"
    if ended.status == "cancelled":
        return (
            f"run {ended.run_id} cancelled in round {ended.rounds}; {spent}; nothing written is "
            f"lost: `sopbus resume {ended.run_dir}` continues it"
        )
    verdict = ended.verdict
    said = f"; verdict: {'passed' if verdict.passed else 'failed'}" if verdict else ""
    detail = ended.summary.error or ended.summary.detail
    return (
        f"run {ended.run_id} {ended.status} ({ended.end_reason}{': ' + detail if detail else ''})"
        f"{said}; {spent}"
    )


def _failure(run: TaskRun, error: BaseException) -> str:
    if isinstance(error, ConfigError):
        return f"run {run.run_id} could not start: {error}"
    return f"run {run.run_id} failed in sopbus ({type(error).__name__}: {error})"


class Guard:
    """ASGI middleware before the SDK: the bearer token (when the server has one) on every
    request but the Agent Card's, and a request body of at most ``MAX_REQUEST_BYTES``,
    each refused as a JSON-RPC error."""

    def __init__(self, app: App, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        card = scope["path"] == AGENT_CARD_WELL_KNOWN_PATH and scope["method"] == "GET"
        if self.token is not None and not card and not self._authorized(headers):
            await _error(
                send,
                401,
                -32001,
                "unauthorized: send Authorization: Bearer TOKEN, the "
                "token of the server's --token-file",
                {"www-authenticate": "Bearer"},
            )
            return
        body = await _body(receive)
        if body is None:
            await _error(
                send, 413, -32600, f"request too large: the limit is {MAX_REQUEST_BYTES} bytes"
            )
            return
        await self.app(scope, _replay(body, receive), send)

    def _authorized(self, headers: dict[str, str]) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        assert self.token is not None
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self.token.encode()
        )


async def _body(receive: Receive) -> bytes | None:
    """The request's whole body, or ``None`` once it passes the limit (read no further)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body read already, then the connection's own messages (its disconnect, which
    ends an event stream whose caller went away)."""
    sent = False

    async def replayed() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _error(
    send: Send, status: int, code: int, message: str, extra: dict[str, str] | None = None
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    headers = [(b"content-type", b"application/json")]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body.encode()})


class _NoTraceback(logging.Formatter):
    """The SDK logs a caller's bad request with its traceback; one line says enough."""

    def formatException(self, ei: Any) -> str:
        return ""

    def format(self, record: logging.LogRecord) -> str:
        record.exc_text = None
        return super().format(record).rstrip()


def _quiet_sdk_logs() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_NoTraceback("sopbus a2a: %(levelname)s %(name)s: %(message)s"))
    sdk = logging.getLogger("a2a")
    sdk.handlers[:] = [handler]
    sdk.setLevel(logging.WARNING)
    sdk.propagate = False


def build_app(settings: ServeSettings, desk: Desk, card: Any) -> App:
    """The Starlette app: the card, the JSON-RPC endpoint, behind :class:`Guard`."""
    from starlette.applications import Starlette

    handler = DefaultRequestHandler(
        agent_executor=RunExecutor(desk), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url=DEFAULT_RPC_URL),
    ]
    return Guard(Starlette(routes=routes), settings.token)


async def serve_until_stopped(settings: ServeSettings, desk: Desk, card: Any) -> None:
    """Serves until SIGINT or SIGTERM; then every running task's run is cancelled (each
    resumable) before this returns."""
    _quiet_sdk_logs()
    await desk.host()
    config = uvicorn.Config(
        build_app(settings, desk, card),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = _Server(
        config,
        f"sopbus a2a: serving {card.name} at {settings.url} (card: "
        f"{settings.url.rstrip('/')}{AGENT_CARD_WELL_KNOWN_PATH})",
    )
    try:
        await server.serve()
    except SystemExit:  # uvicorn's way of saying it could not bind
        raise ConfigError(
            f"--port {settings.port}: could not listen on {settings.host}:{settings.port} "
            f"(in use, or not an address of this machine?); choose another --port or --host"
        ) from None
    finally:
        await desk.close()


class _Server(uvicorn.Server):
    """uvicorn's server, saying once where it listens (a caller may wait for the line)."""

    def __init__(self, config: uvicorn.Config, line: str):
        super().__init__(config)
        self.line = line

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(self.line, file=sys.stderr, flush=True)
