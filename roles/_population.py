"""A population as one member of the bus: many agents, one inbox, columns for their state.

The Environment delivers each message to the population once (:class:`sopbus.bus.Crowd`).
A message nobody is named in (a watched action) is mail for every agent and is kept once;
one that names agents (``Player-17``) is mail for those. Each turn the agents with mail, or
a seeded share of them (``active``), ask the model, at most ``concurrency`` calls in flight,
each through the run's gateway (reserved first, ledgered). What the round adds up to
(counts, mean and distribution of one numeric field) is published as one message, so the
log grows by a round, not by an agent. A population on a follower graph (``spread``) has
feeds instead: an agent's post reaches its followers only, the agents with new posts are
the ones with mail, and each repost is a message of its own (the cascade is in the log).
"""

from __future__ import annotations

import copy
import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec
import pydantic
import trio

from sopbus.bus import (
    BudgetExhausted,
    ChatMessage,
    Completion,
    LLMRequest,
    Message,
    ModelOutputError,
    Turn,
)
from sopbus.bus.population import AgentTable, RoundTally, Spread, acting, repost, round_half_up
from sopbus.bus.scenario import fill_profile

from ._action import Action
from ._answers import (
    field_bounds,
    number_of,
    numeric_field,
    repaired,
    round_message,
    shown,
    spread_message,
)
from ._llm import LLMSettings, build_request, unfence
from ._prompt import fill, schema_text, task_text

BATCH = 2048
"""Agents whose first calls go to the gateway together: enough that a batch's own cost
(its reservation, ledger line and record) is a few bytes a call, few enough that a
batch's requests take little memory and the cap stops a round close to where it runs out."""
_FITS = 65536  # answers whose validation is remembered (a guess game has 101)
_UNFIT = object()  # an answer that does not fit the output schema
_UNSEEN = object()

NEWS_CHARS = 2000
"""The news one agent's prompt is reckoned to carry in the worst case before a run: a
host's announcement and a result are a few hundred characters."""


class Shards(Protocol):
    """Plays a population's rounds on its shards (workers), each a part of its agents."""

    async def play(self, news: Sequence[Message], turn: Turn) -> tuple[RoundTally, str | None]:
        """The shards' tallies merged, and the first refusal of the cap among them."""
        ...


class Population:
    """``table``'s agents, each taking ``action`` when it acts. ``profile`` is the
    per-agent template (``{persona}``...), ``active`` the share that acts per round
    (``None``: all with mail), ``field`` the numeric output field summed per round."""

    def __init__(
        self,
        table: AgentTable,
        *,
        action: Action,
        watch: Sequence[str],
        llm: LLMSettings,
        profile: str = "",
        active: float | None = None,
        concurrency: int = 4,
        seed: int = 0,
        field: str | None = None,
        spread: Spread | None = None,
    ):
        self.table, self.action, self.llm = table, action, llm
        self._watch = frozenset(watch)
        self.profile, self.active, self.concurrency, self.seed = profile, active, concurrency, seed
        self.field = field or numeric_field(action.Output)
        self.bounds = field_bounds(action.Output, self.field)
        self._rounds: list[dict[str, Any]] = []
        self._template: LLMRequest | None = None
        self._fits: dict[str, Any] = {}  # an answer's text -> its output (see _fit)
        self._shared_task: tuple[list[Message], str] | None = None  # (the round's mail, task)
        self.part: range | None = None  # the agents this process runs (a shard); None: all
        self.elsewhere: Shards | None = None  # who plays the rounds instead (the shards)
        self.spread = spread

    # -- the Member and Crowd protocols -------------------------------------------------

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def aliases(self) -> tuple[str, ...]:
        return ()

    @property
    def watch(self) -> frozenset[str]:
        return self._watch

    @property
    def size(self) -> int:
        return self.table.count

    @property
    def actions(self) -> tuple[Action, ...]:
        return (self.action,)

    def agent_index(self, address: str) -> int | None:
        return self.table.index_of(address)

    def aggregates(self) -> list[dict[str, Any]]:
        return list(self._rounds)

    def models(self) -> set[str | None]:
        return {self.llm.model}

    def woken(self) -> int:
        """The most agents that act in one round: all, or the ``active`` share."""
        return self._share(self.size)

    def _share(self, mailed: int) -> int:
        """How many of ``mailed`` agents with mail act: all, or the ``active`` share (at
        least one)."""
        if self.active is None or mailed == 0:
            return mailed
        return min(mailed, max(1, round_half_up(self.active * mailed)))

    def first_woken(self, seed: Sequence[Message]) -> int:
        """The most agents that act in the run's first round, whose news is ``seed``: on a
        follower graph those it gives mail (the seeded posts' authors' followers), else
        :meth:`woken`."""
        if self.spread is None:
            return self.woken()
        return self._share(self.spread.first_reach(seed))

    def sample_request(self, news_chars: int = NEWS_CHARS) -> LLMRequest:
        """Agent 0's request with ``news_chars`` of news: what the worst case of a call is
        reckoned from before the run (the news of a real round is not known yet)."""
        news = Message(cause_by="News", sent_from="Host", content="x" * news_chars)
        return build_request(
            self._prompt(0, [news], ()),
            output=self.action.Output,
            llm=self.llm,
            action=self.action.name,
            role=self.table.agent(0),
        )

    async def step(self, news: Sequence[Message], turn: Turn) -> Sequence[Message]:
        if self.spread is not None:
            return await self._feed_step(self.spread, news, turn)
        tally, stopped = await self.play(news, turn)
        if tally is None:
            return ()
        result = tally.as_dict(turn.round)
        result["field"] = self.field
        self._ended(result, tally, stopped)
        return [round_message(self.name, self.size, self.action.name, self.field, result)]

    def _ended(self, result: dict[str, Any], tally: RoundTally, stopped: str | None) -> None:
        """Keeps the round's ``result``; raises the cap's refusal, if it stopped the round,
        saying how many agents acted."""
        self._rounds.append(result)
        if stopped is not None:
            raise BudgetExhausted(
                f"{stopped}; {self.name}: {tally.acted + tally.failed} of {tally.woke} agents "
                f"acted in round {result['round']} before the cap"
            )

    async def play(
        self, news: Sequence[Message], turn: Turn
    ) -> tuple[RoundTally | None, str | None]:
        """The round's tally of the agents of :attr:`part` that act (``None``: none does),
        and the cap's refusal if it stopped them. With :attr:`elsewhere` set, the shards
        play it (each a part, on a worker) and their tallies come back merged."""
        shared, direct = self._sorted_mail(news)
        mailed: Sequence[int] = range(self.size) if shared else sorted(direct)
        who = acting(mailed, self.active, seed=self.seed, name=self.name, round=turn.round)
        if self.part is not None:
            who = who[bisect_left(who, self.part.start) : bisect_left(who, self.part.stop)]
        if not who:
            return None, None
        if self.elsewhere is not None:
            return await self.elsewhere.play(news, turn)
        tally = RoundTally(len(who), *self.bounds)
        stopped = await self._act_all(who, shared, direct, turn, tally)
        return tally, stopped

    def part_of(self, agents: range) -> Population:
        """This population's agents ``agents`` (a shard): the same table (agent ``i`` is the
        same agent), acting only for its part, with rounds of its own."""
        shard = copy.copy(self)
        shard.part, shard.elsewhere, shard._rounds, shard._template = agents, None, [], None
        shard._fits, shard._shared_task = {}, None
        return shard

    # -- a round ------------------------------------------------------------------------

    async def _feed_step(
        self, spread: Spread, news: Sequence[Message], turn: Turn
    ) -> Sequence[Message]:
        """A round on the follower graph: the agents with new posts in their feeds (or a
        seeded share of them) read them and choose; what they repost goes to their
        followers next round."""
        shared = spread.file(news, turn.round)
        mailed = range(self.size) if shared else spread.mailed()
        who = acting(mailed, self.active, seed=self.seed, name=self.name, round=turn.round)
        if not who:
            return ()
        direct = {i: spread.read(i) for i in who}
        tally = RoundTally(len(who), *self.bounds)
        stopped = await self._act_all(who, shared, direct, turn, tally)
        sums, reposts, roots = spread.close_round()
        counted = tally.as_dict(turn.round)
        result = {k: counted[k] for k in ("round", "woke", "acted", "failed")}
        result.update(sums, field="choice")
        self._ended(result, tally, stopped)
        posts = [repost(self.table.agent(i), read) for i, read in reposts]
        return [*posts, spread_message(self.name, self.size, self.action.name, result, roots)]

    def _sorted_mail(
        self, news: Sequence[Message]
    ) -> tuple[list[Message], dict[int, list[Message]]]:
        """Mail for everyone (kept once), and mail each named agent has."""
        shared: list[Message] = []
        direct: dict[int, list[Message]] = {}
        for message in news:
            if not message.send_to:
                shared.append(message)
                continue
            for address in message.send_to:
                i = self.table.index_of(address)
                if i is not None and address != message.sent_from:
                    direct.setdefault(i, []).append(message)
        return shared, direct

    async def _act_all(
        self,
        who: Sequence[int],
        shared: list[Message],
        direct: dict[int, list[Message]],
        turn: Turn,
        tally: RoundTally,
    ) -> str | None:
        """Every agent of ``who`` acts, :data:`BATCH` agents at a time: their first calls
        go out together (:meth:`sopbus.bus.Turn.ask_many`: reserved first, ``concurrency``
        in flight), then the repairs of answers that did not fit, one by one. The first
        refusal stops the round: no new agent starts. Returns the refusal, if any."""
        for start in range(0, len(who), BATCH):
            agents = who[start : start + BATCH]
            requests = [self._request(i, shared, direct.get(i, ())) for i in agents]
            got = await turn.ask_many(requests, agents, concurrency=self.concurrency)
            refused = await self._settle(agents, requests, got.answers, turn, tally)
            if got.refused is not None or refused is not None:
                return got.refused or refused
        return None

    async def _settle(
        self,
        agents: Sequence[int],
        requests: list[LLMRequest],
        answers: list[Completion | None],
        turn: Turn,
        tally: RoundTally,
    ) -> str | None:
        """Takes each answer of a batch as its agent's (an agent whose call was not made
        did not act); an answer that does not fit is repaired (``concurrency`` at a time)."""
        unfit: list[tuple[int, LLMRequest, Completion]] = []
        for i, request, answer in zip(agents, requests, answers):
            if answer is None:
                continue
            fitted = self._fit(answer.text)
            if fitted is _UNFIT:
                unfit.append((i, request, answer))
            else:
                self._took(i, fitted, tally)
        return await self._repair_all(unfit, turn, tally) if unfit else None

    def _fit(self, text: str) -> Any:
        """The answer ``text`` as the action's output, or :data:`_UNFIT`; remembered per
        text, since a population's answers repeat (a hundred guesses, a million agents)."""
        known = self._fits.get(text, _UNSEEN)
        if known is not _UNSEEN:
            return known
        output: Any = text
        if self.action.Output is not None:
            try:
                output = self.action.Output.model_validate_json(unfence(text))
            except pydantic.ValidationError:
                output = _UNFIT
        if len(self._fits) < _FITS:
            self._fits[text] = output
        return output

    def _took(self, i: int, output: Any, tally: RoundTally) -> None:
        """Agent ``i`` answered ``output``: its value kept as its memory, and counted (on a
        follower graph, its choice too)."""
        if self.spread is not None:
            self.spread.answered(i, str(getattr(output, "choice", "")))
        value = number_of(output, self.field)
        table = self.table
        if value is not None:
            table.last[i] = value
        table.turns[i] += 1
        tally.add(value, fitted=True)

    async def _repair_all(
        self, unfit: list[tuple[int, LLMRequest, Completion]], turn: Turn, tally: RoundTally
    ) -> str | None:
        """Repairs each unfit answer, ``concurrency`` at a time (a worker each: a task per
        agent would cost memory per agent); the first refusal stops new repairs."""
        stop: list[str] = []
        order = iter(unfit)  # one iterator shared by the workers: each agent once

        async def worker() -> None:
            for i, request, answer in order:
                if stop:
                    return
                try:
                    output = await repaired(self.action, turn, request, answer)
                except BudgetExhausted as refused:
                    stop.append(str(refused))
                    return
                except ModelOutputError:
                    tally.add(None, fitted=False)
                    continue
                self._took(i, output, tally)

        async with trio.open_nursery() as nursery:
            for _ in range(min(self.concurrency, len(unfit))):
                nursery.start_soon(worker)
        return stop[0] if stop else None

    def _request(self, i: int, shared: list[Message], mine: Sequence[Message]) -> LLMRequest:
        """Agent ``i``'s request: the population's template (built once: a schema is costly
        to make) with the agent's prompt and name."""
        if self._template is None:
            self._template = self.sample_request(0)
        messages = self._prompt(i, shared, mine)
        if self._template.schema is not None and self.llm.output_mode == "prompt":
            last = messages[-1]
            text = f"{last.content}\n\n{schema_text(self._template.schema)}"
            messages = (*messages[:-1], ChatMessage(last.role, text))
        return _replace(self._template, messages=messages, role=self.table.agent(i))

    def _prompt(
        self, i: int, shared: list[Message], mine: Sequence[Message]
    ) -> tuple[ChatMessage, ...]:
        attributes = self.table.attributes(i)
        values = {k: str(v) for k, v in attributes.items()}
        system = f"You are {attributes['agent']}. " + fill_profile(self.profile, values)
        last = self.table.last[i]
        memory = "" if math.isnan(last) else f"\n\nYour last {self.field}: {shown(last)}."
        return (
            ChatMessage("system", system.strip()),
            ChatMessage("user", self._task(values, shared, mine) + memory),
        )

    def _task(self, values: dict[str, str], shared: list[Message], mine: Sequence[Message]) -> str:
        """The task of an agent's prompt; made once a round for the agents that share it
        (no mail of their own, an instruction without ``$`` fields)."""
        instruction = self.action.instruction
        per_agent = bool(mine) or "$" in instruction
        cached = self._shared_task
        if not per_agent and cached is not None and cached[0] is shared:
            return cached[1]
        if "$" in instruction:
            instruction = fill(instruction, {**values, "action": self.action.name})
        task = task_text(action=self.action.name, instruction=instruction, context=(*shared, *mine))
        if not per_agent:
            self._shared_task = (shared, task)
        return task


_replace = msgspec.structs.replace
