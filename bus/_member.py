"""What the bus needs of a role, and what it hands a role for one turn.

``sopbus.bus`` never imports ``sopbus.roles``: anything with a name, aliases, a set of watched action
names and an async ``step`` can join an :class:`~sopbus.bus.Environment`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ._message import Message
from ._protocol import Answers, Completion, LLMRequest, ToolCall, ToolOutput, ToolSpec


@runtime_checkable
class Member(Protocol):
    """A participant of the bus.

    ``watch`` holds the action names whose messages the member receives when they are not
    addressed to anyone in particular. A member may also have ``watch_from``, a mapping
    from action names to the sender names it watches them from (a sender subscription:
    ``{"Post": frozenset({"Alice"})}`` takes Alice's posts only). An action that is a key
    of ``watch_from`` is watched from those senders only, whether ``watch`` lists it or
    not; every other action of ``watch`` from any sender. ``watch_from`` is optional: a
    member without it watches its actions from anyone (see :func:`sender_subscriptions`). ``step`` is handed the messages that arrived since
    its last turn (in delivery order) and returns the messages it publishes; the
    Environment stamps their ids, run id and round.
    """

    @property
    def name(self) -> str: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...

    @property
    def watch(self) -> frozenset[str]: ...

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]: ...


@runtime_checkable
class Crowd(Member, Protocol):
    """A member that stands for many agents, ``{name}-0`` ... ``{name}-{size-1}``
    (a population, :class:`sopbus.roles.Population`). The Environment delivers to it once
    per message, whichever of its agents the message is for (``send_to`` naming
    ``Player-17`` reaches it without an address-book entry per agent); which agents have
    mail is the crowd's own business. ``aggregates`` are its per-round sums, kept in the
    run's summary."""

    @property
    def size(self) -> int: ...

    def agent_index(self, address: str) -> int | None: ...

    def aggregates(self) -> list[dict[str, Any]]: ...


def sender_subscriptions(member: Member) -> Mapping[str, frozenset[str]]:
    """``member``'s sender subscriptions (its optional ``watch_from``): action -> senders.

    Optional rather than in the protocol, so that every member written before sender
    subscriptions existed (anything with ``watch`` and ``step``) still joins a bus."""
    found: Mapping[str, frozenset[str]] | None = getattr(member, "watch_from", None)
    return found or {}


class LLMGateway(Protocol):
    """The run's single door to the models (see :class:`sopbus.bus.Gateway`)."""

    async def complete(
        self, request: LLMRequest, *, round: int, attempt: int = 1
    ) -> Completion: ...

    async def complete_many(
        self,
        requests: Sequence[LLMRequest],
        *,
        round: int,
        crowd: str,
        agents: Sequence[int],
        concurrency: int = 4,
    ) -> Answers: ...


class ToolService(Protocol):
    """The run's tools (see :class:`sopbus.bus.llm._toolbox.ToolBox`)."""

    def specs(self, patterns: Sequence[str], *, where: str) -> tuple[ToolSpec, ...]: ...

    async def call(
        self, call: ToolCall, *, offered: Sequence[str], role: str, action: str, round: int
    ) -> ToolOutput: ...


class TurnServices(Protocol):
    """What the run loop lends a role during a turn (implemented by the run store)."""

    @property
    def artifacts_dir(self) -> Path: ...

    def write_artifact(self, relpath: str, data: str | bytes, *, role: str, round: int) -> Path: ...

    def emit(self, kind: str, data: Mapping[str, Any], *, role: str, round: int) -> None: ...


class Turn:
    """One role's turn: who, which round, and the run's services bound to them.

    ``ask`` sends a request to the run's gateway (priced, budget-checked, ledgered) with the
    role filled in; ``write_artifact`` keeps a file under the run's ``artifacts/``;
    ``emit`` writes a custom event (``tool_called``, ``gate_passed``, ...) into the run log.
    ``doing`` is the action the role is on, as last said (:meth:`doing_now`, or the action
    of its latest model call): what the live view shows as "role: action".
    ``last_cut`` says whether the latest answer was cut at ``max_tokens`` (finish_reason
    ``length``; each such answer also writes an ``answer_cut`` event): the role marks the
    message an action publishes ``cut`` when the action's last answer was (a repair that
    came back whole clears it).
    ``tool_specs`` and ``call_tool`` reach the run's tools (a run without a tool service
    has none: naming one is a :class:`~sopbus.bus.ConfigError`).
    """

    __slots__ = ("_gateway", "_services", "_tools", "doing", "last_cut", "role", "round", "run_id")

    def __init__(
        self,
        *,
        run_id: str,
        round: int,
        role: str,
        gateway: LLMGateway | None = None,
        services: TurnServices | None = None,
        tools: ToolService | None = None,
    ):
        self._tools = tools
        self.run_id = run_id
        self.round = round
        self.role = role
        self.doing = ""
        self.last_cut = False
        self._gateway = gateway
        self._services = services

    def doing_now(self, action: str) -> None:
        """Says which action the role is on now (for progress displays only)."""
        self.doing = action

    async def ask(self, request: LLMRequest, *, attempt: int = 1) -> Completion:
        if self._gateway is None:
            raise RuntimeError(f"role {self.role!r} asked a model, but this run has no LLM gateway")
        if not request.role:
            import msgspec

            request = msgspec.structs.replace(request, role=self.role)
        self.doing = request.action or self.doing
        completion = await self._gateway.complete(request, round=self.round, attempt=attempt)
        self.last_cut = completion.finish_reason == "length"
        if self.last_cut:
            self.emit("answer_cut", action=request.action, max_tokens=request.max_tokens)
        return completion

    async def ask_many(
        self, requests: Sequence[LLMRequest], agents: Sequence[int], *, concurrency: int
    ) -> Answers:
        """The first attempts of a population's agents ``agents`` (this turn's role is the
        population), ``requests[i]`` agent ``agents[i]``'s: as many as the cap covers,
        ``concurrency`` in flight where the provider has no batch method
        (:meth:`sopbus.bus.Gateway.complete_many`)."""
        if self._gateway is None:
            raise RuntimeError(f"role {self.role!r} asked a model, but this run has no LLM gateway")
        if requests:
            self.doing = requests[0].action or self.doing
        answers = await self._gateway.complete_many(
            requests, round=self.round, crowd=self.role, agents=agents, concurrency=concurrency
        )
        cut = sum(a is not None and a.finish_reason == "length" for a in answers.answers)
        if cut:
            self.emit("answer_cut", action=self.doing, calls=cut)
        return answers

    def tool_specs(self, patterns: Sequence[str], *, where: str) -> tuple[ToolSpec, ...]:
        """The tools ``patterns`` name, with their full names (``where`` says who named them)."""
        if self._tools is None:
            from ._errors import ConfigError

            raise ConfigError(f"{where} names tools {list(patterns)}, but this run has no tools")
        return self._tools.specs(patterns, where=where)

    async def call_tool(self, call: ToolCall, *, offered: Sequence[str], action: str) -> ToolOutput:
        """Runs (or answers from the recording) one tool call the model asked for."""
        assert self._tools is not None, "tool_specs gave the tools, so there is a tool service"
        return await self._tools.call(
            call, offered=offered, role=self.role, action=action, round=self.round
        )

    @property
    def artifacts_dir(self) -> Path | None:
        return self._services.artifacts_dir if self._services else None

    def write_artifact(self, relpath: str, data: str | bytes) -> Path | None:
        if self._services is None:
            return None
        return self._services.write_artifact(relpath, data, role=self.role, round=self.round)

    def emit(self, kind: str, **data: Any) -> None:
        if self._services is not None:
            self._services.emit(kind, data, role=self.role, round=self.round)
