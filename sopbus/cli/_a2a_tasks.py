"""The runs behind ``sopbus a2a serve``, without the protocol: admitting a task under the
money limits, running it as a normal run, watching its progress, and cancelling it.

The A2A SDK is asyncio; the engine is trio. The server's asyncio loop hosts one trio run
as a *guest* (``trio.lowlevel.start_guest_run``, as :func:`sopbus.run_scenario_asyncio`
does for one run), and every task's run is a child of that run's nursery: one thread, so
no lock guards a :class:`TaskRun`, and a run's LLM calls and writes yield to the loop that
answers other requests meanwhile. asyncio hands work to trio with the trio token; trio
hands results back with the loop's ``call_soon_threadsafe``.

Money: the task's budget (``--max-budget``, or less if the message's metadata asks) is
held in a :class:`~sopbus.bus.money.FileAccount` whose cap is ``--max-total`` when the task
is accepted, and settled at what the run spent when it ends. A run never spends past its
own cap (its gateway reserves every call first), so the sum of the tasks' spend never
passes the total either; a task the account cannot cover is refused before its run exists.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from sopbus.bus import BudgetExhausted, ConfigError, Scenario, scenario_with_overrides
from sopbus.bus.money import FileAccount, Hold, money

if TYPE_CHECKING:
    from sopbus._outcome import RunOutcome

POLL_S = 0.2
"""How often a running task's files are read for progress (the run does not wait on it)."""
BUDGET_KEY = "budget_usd"
"""The message metadata key a caller asks for a smaller budget with."""


class Refused(Exception):
    """A task was not accepted (its budget, the server's total, an empty message); the
    message says why and what to change. Nothing ran."""


@dataclass(frozen=True)
class Progress:
    """What a running task's files say now."""

    round: int
    max_rounds: int
    working: str
    spent: Decimal
    budget: Decimal

    def text(self) -> str:
        at_work = f" | at work: {self.working}" if self.working else ""
        return (
            f"round {self.round}/{self.max_rounds}{at_work} | spent {money(self.spent)} of "
            f"{money(self.budget)}"
        )

    def data(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "working": self.working,
            "spent_usd": str(self.spent),
            "budget_usd": str(self.budget),
        }


@dataclass
class TaskRun:
    """One accepted task: its run's id and budget, its progress as it comes, its end."""

    run_id: str
    run_dir: Path
    budget: Decimal
    scenario: Scenario
    hold: Hold
    updates: asyncio.Queue[Progress] = field(default_factory=asyncio.Queue)
    ended: asyncio.Future[RunOutcome | BaseException] | None = None
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    watch: _Watch | None = None
    closed: bool = False
    """Set once the task's terminal state is published (by the run's end or by a cancel)."""


class Desk:
    """Accepts tasks and runs them in the trio guest's nursery (see the module docstring)."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        max_budget: Decimal,
        account: FileAccount,
        environ: Mapping[str, str],
    ):
        self.scenario = scenario
        self.max_budget = max_budget
        self.account = account
        self.environ = environ
        self.tasks: dict[str, TaskRun] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None

    # -- the trio guest ------------------------------------------------------------------

    async def host(self) -> None:
        """Starts the trio guest on the running loop; returns once it takes tasks."""
        self._loop = loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._finished: asyncio.Future[Any] = loop.create_future()

        async def engine() -> None:
            async with trio.open_nursery() as nursery:
                self._nursery, self._token = nursery, trio.lowlevel.current_trio_token()
                loop.call_soon_threadsafe(ready.set_result, None)
                await trio.sleep_forever()

        # asyncio (and uvicorn) own the signals in this thread; trio leaves them alone. Trio
        # would still take SIGINT for itself, seeing Python's default handler: uvicorn puts
        # back the handler it found when it stops, and raises the signal it caught again,
        # which would then be a KeyboardInterrupt inside the runs being closed. The server
        # is stopping by then, so the handler it finds ignores it.
        signal.signal(signal.SIGINT, _stopping)
        trio.lowlevel.start_guest_run(
            engine,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=lambda result: loop.call_soon_threadsafe(
                self._finished.set_result, result
            ),
            host_uses_signal_set_wakeup_fd=True,
        )
        await ready

    async def close(self) -> None:
        """Cancels every running task's run (each writes its ``cancelled`` summary and
        stays resumable) and waits for the guest to end."""
        if self._token is not None and self._nursery is not None:
            self._token.run_sync_soon(self._nursery.cancel_scope.cancel)
            result = await self._finished
            result.unwrap()

    # -- tasks ---------------------------------------------------------------------------

    def accept(self, text: str, metadata: Mapping[str, Any]) -> TaskRun:
        """A new task for ``text`` under its budget, held in the server's account; starts
        its run. :class:`Refused` (nothing held, nothing run) when it cannot be."""
        from sopbus.bus import new_run_id

        if not text.strip():
            raise Refused("the message has no text: send the idea for the team as a text part")
        budget = self._budget(metadata.get(BUDGET_KEY))
        run_id = new_run_id(self.scenario.name)
        hold = self._hold(run_id, budget)
        scenario = scenario_with_overrides(self.scenario, idea=text, budget_usd=budget)
        run_dir = Path(scenario.run.runs_dir) / run_id
        task = TaskRun(run_id, run_dir, budget, scenario, hold)
        assert self._loop is not None and self._token is not None and self._nursery is not None
        task.ended = self._loop.create_future()
        self.tasks[run_id] = task
        self._token.run_sync_soon(self._nursery.start_soon, self._run, task)
        return task

    def cancel(self, task: TaskRun) -> None:
        """Asks ``task``'s run to stop (it ends ``cancelled``; ``task.ended`` says when)."""
        if self._token is not None:
            self._token.run_sync_soon(task.scope.cancel)

    def _budget(self, asked: Any) -> Decimal:
        if asked is None:
            return self.max_budget
        try:
            amount = Decimal(str(asked))
        except InvalidOperation:
            amount = Decimal("NaN")
        if isinstance(asked, bool) or not amount.is_finite() or amount <= 0:
            raise Refused(
                f"metadata {BUDGET_KEY} {asked!r}: expected an amount of USD greater than 0, "
                f"such as 0.05; nothing was run"
            )
        if amount > self.max_budget:
            raise Refused(
                f"metadata {BUDGET_KEY} {money(amount)} is above this server's "
                f"{money(self.max_budget)} per task (--max-budget): ask for at most "
                f"{money(self.max_budget)}; nothing was run"
            )
        return amount

    def _hold(self, run_id: str, budget: Decimal) -> Hold:
        try:
            return self.account.reserve_now(run_id, budget)
        except BudgetExhausted:
            state = self.account.read()
            raise Refused(
                f"the task's budget of {money(budget)} does not fit in what is left of this "
                f"server's total: {money(max(state.left, Decimal(0)))} of {money(state.cap)} "
                f"(--max-total; {money(state.spent)} spent, {money(state.held)} held by "
                f"running tasks); ask for less in metadata {BUDGET_KEY}, or wait for running "
                f"tasks to end; nothing was run"
            ) from None

    async def _run(self, task: TaskRun) -> None:
        """Runs ``task``'s scenario to its end (or its cancel) with its progress watched,
        then settles its hold and hands the outcome (or the error) to asyncio."""
        from sopbus._assemble import execute
        from sopbus._outcome import RunOutcome

        ended: RunOutcome | BaseException
        assert self._loop is not None and task.ended is not None
        task.watch = _Watch(task, self._loop)
        try:
            async with trio.open_nursery() as watching:
                watching.start_soon(self._watch, task)
                with task.scope:
                    await execute(task.scenario, environ=self.environ, run_id=task.run_id)
                watching.cancel_scope.cancel()
            task.watch.step()  # the last round and spend, however short the run was
            ended = RunOutcome.open(task.run_dir)
        except ConfigError as error:  # said before any call; the run never started
            ended = error
        except Exception as error:  # a bug: the task fails with it, the server goes on
            from loguru import logger

            logger.opt(exception=error).error(f"task {task.run_id}: the run raised")
            ended = error
        finally:
            self._settle(task)
        self._loop.call_soon_threadsafe(task.ended.set_result, ended)

    def _settle(self, task: TaskRun) -> None:
        spent = _ledger_total(task.run_dir)
        self.account.settle_now(task.hold, min(spent, task.budget))

    async def _watch(self, task: TaskRun) -> None:
        """Posts the run's progress whenever its round, its roles at work or its spend change."""
        assert task.watch is not None
        while True:
            await trio.sleep(POLL_S)
            task.watch.step()


def _stopping(signum: int, frame: Any) -> None:
    """SIGINT outside uvicorn's serving: the server is stopping already."""


class _Watch:
    """The progress of one task's run as its files tell it, posted to asyncio on change."""

    def __init__(self, task: TaskRun, loop: asyncio.AbstractEventLoop):
        self.task, self.loop = task, loop
        self.reader = _EventTail(task.run_dir / "events.jsonl")
        self.last: Progress | None = None

    def step(self) -> None:
        self.reader.read()
        now = Progress(
            self.reader.round,
            self.task.scenario.run.max_rounds,
            self.reader.working,
            _ledger_total(self.task.run_dir),
            self.task.budget,
        )
        if now != self.last and now.round > 0:
            self.last = now
            self.loop.call_soon_threadsafe(self.task.updates.put_nowait, now)


class _EventTail:
    """Reads the lines a run appends to its ``events.jsonl``: the round and who works in it."""

    def __init__(self, path: Path):
        self.path, self._offset = path, 0
        self.round, self.working = 0, ""
        self._at_work: dict[str, str] = {}

    def read(self) -> None:
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                chunk = file.read()
        except FileNotFoundError:
            return
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for the next read
        self._offset += len(whole)
        for line in whole.splitlines():
            self._take(json.loads(line))

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("kind")
        if kind == "round_started":
            self.round = int(event.get("round", 0))
            self._at_work = {str(role): "" for role in event.get("turns", [])}
        elif kind == "llm_reserved":
            role, action = str(event.get("role", "")), str(event.get("data", {}).get("action", ""))
            self._at_work[role] = action
        self.working = ", ".join(
            f"{role}: {action}" if action else role for role, action in self._at_work.items()
        )


def _ledger_total(run_dir: Path) -> Decimal:
    """The run's spend so far: the ``total_usd`` of its ledger's last whole line."""
    try:
        data = (run_dir / "costs.jsonl").read_bytes()
    except FileNotFoundError:
        return Decimal(0)
    lines = data[: data.rfind(b"\n") + 1].splitlines()
    return Decimal(json.loads(lines[-1])["total_usd"]) if lines else Decimal(0)


def load_team(path: Path, model: Mapping[str, Any], runs_dir: Path) -> tuple[Scenario, Any]:
    """The scenario at ``path`` (or the shipped one of that name) with the server's model and
    runs directory laid over it, and its team, checked as ``sopbus run`` checks them."""
    from sopbus._assemble import preflight, quiet_for_the_api, run_environ
    from sopbus._examples import scenario_path
    from sopbus.bus import load_scenario

    scenario = scenario_with_overrides(
        load_scenario(scenario_path(path)), **model, runs_dir=runs_dir
    )
    team = preflight(scenario, run_environ()).team
    quiet_for_the_api()  # a run's log lines go to its run.log; stderr gets warnings
    return scenario, team


def open_account(path: Path, cap: Decimal) -> FileAccount:
    """The server's account of ``cap`` (``--max-total``) in a fresh file at ``path``."""
    return FileAccount.create(path, cap, fix="restart `sopbus a2a serve` with a larger --max-total")
