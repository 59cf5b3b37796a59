"""Live progress of ``sopbus run``: round, messages, spend against the budget, and who is
working on what.

On a terminal a rich progress bar redraws in place, with a line under it naming the roles
taking their turn (``at work: Alice: WritePRD``); elsewhere (CI logs, pipes) a plain line
is printed whenever the round changes. Either way the display only *reads* the run's
counters (polling a few times a second), so the engine knows nothing about it, and it draws
its last frame from the run's final counters, so the bar never shows an earlier round above
the summary.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import trio

from sopbus.bus import wrap_text
from sopbus.bus.llm import LiveText, Person
from sopbus.bus.money import money

if TYPE_CHECKING:
    from sopbus.bus import RunGateway

_POLL_S = 0.1
_WORKING_WIDTH = 100  # characters of "role: action, ..." shown under the bar


def _say(line: str) -> None:
    """Prints a progress line as the CLI prints its plain lines (``sopbus.cli``'s
    ``line_width``): wrapped at the terminal's width (or ``COLUMNS``), later lines indented,
    names never split; piped into a file or a program without ``COLUMNS``, whole, so a
    script that greps a line finds it."""
    import os
    import shutil

    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        print(line, flush=True)
        return
    print(wrap_text(line, shutil.get_terminal_size().columns), flush=True)


class Progress:
    """``async with Progress(env, gateway, scenario, run_dir, runner): ...`` around a run;
    ``runner`` (optional) says who is at work (:meth:`sopbus.bus.Runner.at_work`)."""

    def __init__(
        self, env: Any, gateway: RunGateway, scenario: Any, run_dir: Path, runner: Any = None
    ):
        self._env, self._gateway, self._runner = env, gateway, runner
        self._name, self._max_rounds = scenario.name, scenario.run.max_rounds
        self._run_dir = run_dir
        self._cancel = trio.CancelScope()
        self._nursery_cm: Any = None
        self._tty = sys.stdout.isatty()
        self._bar: Any = None  # the rich display, while it is shown
        self.person: Person | None = None  # the run's person, when a role is answered by one
        self.live = LiveText()  # streamed text of the calls in flight (shown on a terminal)

    async def __aenter__(self) -> Progress:
        _say(f"sopbus: running {self._name} -> {self._run_dir}")
        self._nursery_cm = trio.open_nursery()
        nursery = await self._nursery_cm.__aenter__()
        nursery.start_soon(self._live if self._tty else self._lines)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._cancel.cancel()
        handled = bool(await self._nursery_cm.__aexit__(kind, exc, tb))
        if not self._tty:
            rnd, published, spent, cap = self._state()
            _say(
                f"ended in round {rnd} | messages {published} | spent {money(spent)} of {money(cap)}"
            )
        return handled

    @asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """The display keeps quiet meanwhile (a person is typing an answer below it)."""
        bar = self._bar
        if bar is not None:
            bar.stop()
        try:
            yield
        finally:
            if bar is not None:
                bar.start()

    def _state(self) -> tuple[int, int, Decimal, Decimal]:
        budget = self._gateway.budget
        return self._env.round, self._env.published, budget.spent, budget.cap

    def _waiting(self) -> str:
        who = self.person.waiting if self.person is not None else None
        return f"waiting for a person: {who}" if who else ""

    def working(self) -> str:
        """``Alice: WritePRD, Bob: WriteDesign``: the roles in their turn, cut to fit."""
        at_work = self._runner.at_work() if self._runner is not None else []
        text = ", ".join(f"{role}: {action}" if action else role for role, action in at_work)
        return text if len(text) <= _WORKING_WIDTH else text[: _WORKING_WIDTH - 3] + "..."

    async def _lines(self) -> None:
        last, last_wait = -1, ""
        with self._cancel:
            while True:
                rnd, published, spent, cap = self._state()
                if rnd != last:
                    last = rnd
                    working = self.working()
                    _say(
                        f"round {rnd}/{self._max_rounds} | messages {published} | "
                        f"spent {money(spent)} of {money(cap)}"
                        + (f" | working: {working}" if working else "")
                    )
                waiting = self._waiting()
                if waiting and waiting != last_wait:
                    _say(waiting)
                last_wait = waiting
                await trio.sleep(_POLL_S)

    async def _live(self) -> None:
        from rich.console import Group
        from rich.live import Live
        from rich.progress import BarColumn, TextColumn
        from rich.progress import Progress as Bar
        from rich.text import Text

        bar = Bar(
            TextColumn("[bold]round {task.fields[round]}/{task.fields[max_rounds]}"),
            TextColumn("messages {task.fields[messages]}"),
            BarColumn(),
            TextColumn("{task.fields[spent_text]} of {task.fields[cap_text]}"),
            TextColumn("[yellow]{task.fields[waiting]}"),
        )
        rnd, published, spent, cap = self._state()
        task = bar.add_task(
            "spend",
            total=float(cap),
            round=rnd,
            max_rounds=self._max_rounds,
            messages=published,
            spent_text=money(spent),
            cap_text=money(cap),
            waiting="",
        )

        def frame(doing: str) -> Group:
            streamed = [
                Text(line, no_wrap=True, overflow="ellipsis", style="dim")
                for line in self.live.lines()
            ]
            return Group(
                bar, Text(doing, no_wrap=True, overflow="ellipsis", style="dim"), *streamed
            )

        with Live(frame(""), refresh_per_second=10, transient=False) as live:
            self._bar = live
            with self._cancel:
                while True:
                    self._update(bar, task)
                    live.update(frame(f"at work: {self.working() or '-'}"))
                    await trio.sleep(_POLL_S)
            # The run is over: the last frame shows its final round, messages and spend.
            self._update(bar, task)
            live.update(frame("finished"), refresh=True)

    def _update(self, bar: Any, task: Any) -> None:
        rnd, published, spent, _cap = self._state()
        bar.update(
            task,
            completed=float(spent),
            round=rnd,
            messages=published,
            spent_text=money(spent),
            waiting=self._waiting(),
        )
