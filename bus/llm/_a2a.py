"""The one door to remote A2A agents: the official ``a2a-sdk`` client, on an asyncio loop of
its own thread, behind a trio API.

A scenario's ``[a2a.NAME]`` agent is a tool source named ``NAME`` with one tool, ``send``
(``{"text": ...}``): a role with ``agent = "a2a.NAME"`` calls it for each message it
watches (:mod:`sopbus.roles`), so the call goes through the run's ToolBox like any tool
call: recorded in ``calls.jsonl`` with a ``tool_called`` event, priced under the cap when
the table gives ``price_per_call``, and answered from the recording on replay and resume
(which never reach the agent again). The SDK is asyncio-only, so, as
:mod:`sopbus.bus.nats._link` does for NATS, a private loop runs on a daemon thread and each
call crosses to it once; a trio caller that is cancelled cancels the asyncio task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from decimal import Decimal
from typing import Any, TypeVar

import trio

from .._errors import ToolServerError, ToolServerSetupError
from .._protocol import ToolOutput, ToolSpec
from ..scenario import A2AAgent

T = TypeVar("T")

SEND = "send"
"""The one tool of an A2A agent's source: send a text, get the agent's answer."""


class _Loop:
    """An asyncio loop on a daemon thread; :meth:`cross` runs a coroutine there from trio."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="sopbus-a2a", daemon=True
        )
        self._thread.start()

    async def cross(self, coro: Awaitable[T]) -> T:
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: Any) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future.add_done_callback(wake)
        try:
            await done.wait()
        except BaseException:
            future.cancel()
            raise
        return future.result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


class A2ASource:
    """``[a2a.NAME]`` as a tool source (see the module docstring)."""

    def __init__(self, name: str, spec: A2AAgent, card: Any, loop: _Loop):
        self.name, self.spec, self.card, self._loop = name, spec, card, loop
        self.price_per_call: Decimal | None = spec.price_per_call

    def specs(self) -> Sequence[ToolSpec]:
        schema = {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        return (ToolSpec(name=SEND, description=self.card.description, parameters=schema),)

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        if tool != SEND:
            text = f"Error: the A2A agent {self.name!r} has one tool, {SEND}"
            return ToolOutput(text=text, is_error=True, chars=len(text))
        timeout = self.spec.timeout_s
        try:
            with trio.fail_after(timeout):
                answer = await self._loop.cross(_send(self.card, str(arguments.get("text", ""))))
        except trio.TooSlowError:
            raise ToolServerError(
                self.name,
                f"the A2A agent at {self.spec.url} gave no answer within {timeout:g} s "
                f"([a2a.{self.name}].timeout_s); raise it, or check the agent",
            ) from None
        except _Failed as failed:
            raise ToolServerError(self.name, f"the A2A agent at {self.spec.url} {failed}") from None
        except Exception as error:  # the SDK's errors: the agent is down, or said no
            raise ToolServerError(self.name, _refused(self.spec.url, self.name, error)) from None
        bound = self.spec.max_result_chars
        cut = len(answer) > bound
        text = answer[:bound] + ("\n[cut: the answer was longer]" if cut else "")
        return ToolOutput(text=text, chars=len(answer), cut=cut)


def _refused(url: str, name: str, error: Exception) -> str:
    import httpx

    said = f"({type(error).__name__}: {error})"
    if isinstance(error, httpx.TransportError) or isinstance(error.__cause__, httpx.TransportError):
        return f"the A2A agent at {url} cannot be reached {said}; start it, or fix [a2a.{name}].url"
    return f"the A2A agent at {url} refused the call {said}"


class _Failed(Exception):
    """The agent answered with a task that did not complete (the message says how it ended)."""


async def _card(url: str) -> Any:
    import httpx
    from a2a.client import A2ACardResolver

    async with httpx.AsyncClient() as http:
        return await A2ACardResolver(http, url).get_agent_card()


async def _send(card: Any, text: str) -> str:
    """The agent's answer to ``text``: its artifacts' text, else its last message's."""
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.helpers import get_message_text, new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    async with httpx.AsyncClient(timeout=None) as http:
        client = await create_client(card, ClientConfig(streaming=False, httpx_client=http))
        request = SendMessageRequest(message=new_text_message(text, role=Role.ROLE_USER))
        last: Any = None
        async for event in client.send_message(request):
            last = event
        await client.close()
    if last is None:
        raise _Failed("answered nothing")
    if last.HasField("message"):
        return str(get_message_text(last.message))
    task = last.task
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        said = get_message_text(task.status.message) if task.status.HasField("message") else ""
        state = TaskState.Name(task.status.state)
        raise _Failed(f"ended its task {state}" + (f": {said}" if said else ""))
    return _task_text(task)


def _task_text(task: Any) -> str:
    from a2a.helpers import get_artifact_text, get_message_text

    if task.artifacts:
        return "\n\n".join(f"## {a.name}\n{get_artifact_text(a)}" for a in task.artifacts)
    return str(get_message_text(task.status.message))


@asynccontextmanager
async def open_a2a_agents(agents: Mapping[str, A2AAgent]) -> AsyncIterator[list[A2ASource]]:
    """The scenario's A2A agents as tool sources, each card read first (an agent whose card
    cannot be read is a :class:`~sopbus.bus.ToolServerSetupError` naming it)."""
    loop = _Loop()
    try:
        sources = []
        for name, spec in agents.items():
            try:
                with trio.fail_after(spec.timeout_s):
                    card = await loop.cross(_card(spec.url))
            except (Exception, trio.TooSlowError) as error:
                raise ToolServerSetupError(
                    name,
                    f"no Agent Card at {spec.url} ({type(error).__name__}: {error}); start the "
                    f"agent, or fix [a2a.{name}].url",
                ) from None
            sources.append(A2ASource(name, spec, card, loop))
        yield sources
    finally:
        loop.close()
