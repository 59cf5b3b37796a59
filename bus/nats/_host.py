"""One role hosted on a worker: the turns it is asked for, taken once each.

:class:`RoleHost` serves the turn requests of one claimed role (:mod:`sopbus.bus.nats._wire`): a
request is answered by the turn with its ``(epoch, turn)``, whoever asks and however often;
a request of a new epoch (a resumed coordinator) or the first one after a takeover starts
the role afresh, its earlier turns replayed (:meth:`RoleHost._replay`) with the answers the
role's earlier hosts got (from the stream: not asked, not paid again), so its memory is
what it was. A turn reads its news from the role's inbox, runs the real role's ``step``, and
answers the output messages, or what ended it (``budget``, ``stop``, ``failed``) as data,
once all its effects are stored; then it acks the inbox.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio
from loguru import logger

from .._errors import BudgetExhausted, StopRun, exception_leaves
from .._member import Member, Turn
from .._message import Message
from ..llm import CallRecord, Gateway, Tape, TapeGateway, ToolBox, ToolRecord, ToolSource
from ._effects import EffectSender, TurnEffects, write_mirrored
from ._inbox import Inbox
from ._link import Link
from ._subjects import turn_subject
from ._wire import (
    TurnAnswer,
    TurnRequest,
    answer_of,
    decode_request,
    encode,
    fenced,
    stored_effects,
    tool_of,
)

READ_NEWS_S = 60.0  # how long a turn waits for its news to arrive on the role's consumer


class _Quiet:
    """The run log of a taped gateway on a worker: the coordinator logs the run, not us."""

    def log(self, event: Any) -> None:
        pass

    def record_answer(self, record: Any) -> None:
        pass


def classify(exc: BaseException) -> tuple[str, str]:
    """What ended a turn, as the answer says it: ``budget``, ``stop`` or ``failed``."""
    leaves = list(exception_leaves(exc))
    if leaves and all(isinstance(e, (BudgetExhausted, StopRun)) for e in leaves):
        budget = next((e for e in leaves if isinstance(e, BudgetExhausted)), None)
        if budget is not None:
            return "budget", str(budget)
        stop = leaves[0]
        assert isinstance(stop, StopRun)
        return "stop", stop.detail
    first = next((e for e in leaves if not isinstance(e, (BudgetExhausted, StopRun))), exc)
    text = "".join(traceback.format_exception(exc))
    return "failed", f"{type(first).__name__}: {first}\n--- on the worker:\n{text}"


class RoleHost:
    """Hosts one claimed role of a run on this worker (see the module docstring)."""

    def __init__(
        self,
        member: Member,
        fresh: Callable[[], Member],
        *,
        link: Link,
        run_id: str,
        host: str,
        inbox: Inbox,
        sender: EffectSender,
        gateway_for: Callable[[TurnEffects], Gateway],
        mirror: Path,
        tenure: int = 0,
        tools: Sequence[ToolSource] = (),
    ):
        self.fresh, self.link, self.run_id, self.host = fresh, link, run_id, host
        self.tenure = tenure  # our claim's fencing token: we answer requests made for it only
        self.member = member
        self.inbox = inbox
        self.effects = TurnEffects(sender, self.member.name, mirror, tenure=tenure)
        self._gateway = gateway_for(self.effects)
        self.gateway: Any = self._gateway
        # The role's tool calls run here, priced through this worker's gateway (the run's
        # shared account); their results and notes are effects like its model calls.
        self.sources = tools
        self.tools = self._toolbox(None)
        self.epoch = -1
        self.done: dict[tuple[int, int], bytes] = {}  # (epoch, turn) -> its answer
        self.busy: tuple[int, int] | None = None
        self.replies: list[str] = []
        self.seen = 0  # the last turn this host took (or replayed) in this epoch

    async def _begin(self, epoch: int) -> None:
        """The role as a new host (or a resumed coordinator) needs it: a fresh instance whose
        calls take the answers already recorded for the role from the run's stream (not
        asked, not paid again); the rest go live."""
        if self.epoch >= 0:
            self.member = self.fresh()
        self.epoch, self.seen = epoch, 0
        recorded, results = await recorded_calls(self.link, self.run_id, self.member.name)
        self.tools = self._toolbox(Tape((), match="key", tools=results) if results else None)
        self.gateway = (
            TapeGateway(
                self._gateway,
                Tape(recorded, match="key"),
                free=False,
                taped_through=0,
                store=_Quiet(),
            )
            if recorded
            else self._gateway
        )

    def _toolbox(self, tape: Tape | None) -> ToolBox:
        """The role's tools; a ``tape`` (a new host's) answers the calls its earlier hosts
        made (not run, not paid again)."""
        return ToolBox(self.sources, gateway=self._gateway, store=self.effects, tape=tape)

    async def serve(self) -> None:
        async with (
            trio.open_nursery() as nursery,
            self.link.subscribe(turn_subject(self.run_id, self.member.name)) as requests,
        ):
            async for msg in requests:
                request = decode_request(msg.data)
                key = (request.epoch, request.turn)
                if (request.host, request.tenure) != (self.host, self.tenure):
                    # For the role's next holder (our lease lapsed: we were paused): not ours.
                    logger.debug(
                        "turn {} of {} is asked of {} (tenure {}), not of us",
                        request.turn,
                        request.role,
                        request.host,
                        request.tenure,
                    )
                elif key in self.done:
                    await self.link.publish(msg.reply, self.done[key])
                elif key == self.busy:
                    self.replies.append(msg.reply)
                elif self.busy is None and request.epoch >= self.epoch:
                    self.busy, self.replies = key, [msg.reply]
                    nursery.start_soon(self._take, request)

    async def _take(self, request: TurnRequest) -> None:
        if request.epoch != self.epoch:
            await self._begin(request.epoch)
        for past in request.history:
            if past.turn > self.seen:
                await self._replay(past.turn, past.round, past.wanted)
        try:
            answer = await self._turn(request)
        except Exception as exc:  # the news never came, the effects could not be stored
            ended, detail = classify(exc)
            answer = TurnAnswer(
                turn=request.turn,
                ended=ended,
                detail=detail,
                effects=self.effects.count,
                host=self.host,
                tenure=self.tenure,
            )
        data = encode(answer)
        # only the last: an older turn is never asked again
        self.done = {(request.epoch, request.turn): data}
        self.busy = None
        for reply in self.replies:
            await self.link.publish(reply, data)
        await self.inbox.ack()

    async def _replay(self, turn: int, round: int, wanted: list[tuple[str, int]]) -> None:
        """Takes an earlier turn again to rebuild the role's state (a new host); its effects
        are marked replayed (the coordinator has them) and its outputs dropped."""
        self.effects.begin(self.epoch, turn, replaying=True)
        news = await self.inbox.read(wanted, timeout=READ_NEWS_S)
        try:
            await self.member.step(
                news,
                Turn(
                    run_id=self.run_id,
                    round=round,
                    role=self.member.name,
                    gateway=self.gateway,
                    services=self.effects,
                    tools=self.tools,
                ),
            )
        except Exception:
            pass  # it ended the same way the first time; the coordinator has that answer
        self.seen = turn

    async def _turn(self, request: TurnRequest) -> TurnAnswer:
        for path, data in request.artifacts.items():
            write_mirrored(self.effects.mirror, path, data)
        self.effects.begin(request.epoch, request.turn)
        news = await self.inbox.read(request.wanted, timeout=READ_NEWS_S)
        turn = Turn(
            run_id=self.run_id,
            round=request.round,
            role=self.member.name,
            gateway=self.gateway,
            services=self.effects,
            tools=self.tools,
        )
        ended, detail = "", ""
        out: Sequence[Message] = ()
        try:
            out = await self.member.step(news, turn)
        except Exception as exc:
            ended, detail = classify(exc)
            if ended == "failed":
                logger.warning(
                    "role {} failed in round {}: {}",
                    self.member.name,
                    request.round,
                    detail.splitlines()[0],
                )
        self.seen = request.turn
        await self.effects.sender.flushed()
        return TurnAnswer(
            turn=request.turn,
            messages=list(out or ()),
            ended=ended,
            detail=detail,
            effects=self.effects.count,
            host=self.host,
            tenure=self.tenure,
        )


async def recorded_calls(
    link: Link, run_id: str, role: str
) -> tuple[list[CallRecord], list[ToolRecord]]:
    """The answers and tool results the role's earlier hosts got (``called`` effects with a
    completion or a paid tool's result, ``tool`` effects; not replayed, accepted by the
    coordinator), from the run's stream: what a new host must not ask, run or pay for again.
    (One that a paused host got after it was fenced off was never ledgered: it is asked
    again, not taken for free.)"""
    kept = [e for e in fenced(await stored_effects(link, run_id, role)) if not e.replayed]
    answers = [record for e in kept if (record := answer_of(e.effect)) is not None]
    return answers, [result for e in kept if (result := tool_of(e.effect)) is not None]
