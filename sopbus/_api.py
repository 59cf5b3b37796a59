"""Running a scenario from Python, in the three places Python code runs.

sopbus's engine runs under trio. :func:`run_scenario` blocks and works wherever a call can
block: in a plain script it runs trio in the calling thread; where an asyncio loop is
already running in that thread (Jupyter, IPython's kernel, an asyncio program) it runs
trio in a worker thread and waits for it, since trio cannot run inside asyncio's loop and
``asyncio.run`` cannot be called there either. :func:`run_scenario_async` is the form for
trio programs, :func:`run_scenario_asyncio` the ``await``-able form for asyncio programs
and notebooks: trio runs as a *guest* on the running asyncio loop (``trio.lowlevel.
start_guest_run``), so the loop keeps serving other tasks during the run.

The scenario is loaded and checked, and the keys read, in the caller's thread before
anything runs, so a mistake is a :class:`~sopbus.bus.ConfigError` at the call. Keys and endpoints
(``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) come from ``environ`` when it is given, else from
the process environment over a ``.env`` file in the working directory; they are handed to
the run and written nowhere.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import os
import threading
from collections.abc import Mapping
from typing import Any

import outcome as trio_outcome
import trio
from loguru import logger

from sopbus.bus import ConfigError, Scenario, load_scenario, scenario_with_overrides

from ._examples import scenario_path
from ._outcome import RunOutcome

OVERRIDES: tuple[str, ...] = tuple(
    name for name in inspect.signature(scenario_with_overrides).parameters if name != "scenario"
)
"""The keyword overrides the run functions take, as ``sopbus run``'s flags name them:
``idea``, ``provider``, ``model``, ``base_url``, ``budget_usd``, ``max_rounds``, ``seed``,
``mode``, ``runs_dir``, ``sandbox`` and ``price`` (``(INPUT, OUTPUT)``, USD per 1M tokens)."""


def run_scenario(
    path: str | os.PathLike[str],
    /,
    *,
    environ: Mapping[str, str] | None = None,
    verbose: bool = False,
    **overrides: Any,
) -> RunOutcome:
    """Runs the scenario file at ``path`` (or the shipped scenario of that name,
    ``"software_company"``) to its end and returns its :class:`RunOutcome`.

    ``overrides`` lay values over the file as ``sopbus run``'s flags do
    (``model="gpt-4o-mini"``, ``budget_usd=0.5``, ``max_rounds=3``, ``runs_dir="runs"``,
    ``price=(0, 0)`` for a local model; see :data:`OVERRIDES`). ``environ`` holds the keys and endpoints (default: the process
    environment over ``./.env``). A bad file, override or missing key raises
    :class:`~sopbus.bus.ConfigError` before anything runs; a run that fails or runs out of budget
    returns normally with that ``status``. The run prints only warnings to stderr;
    ``verbose=True`` prints its log lines too (all are in the run's ``run.log``).

    Blocks; works from a script and from a notebook cell (an asyncio loop already
    running). Inside a trio program ``await`` :func:`run_scenario_async` instead.
    """
    job = Job.prepare(path, environ, overrides, verbose)
    return run_blocking(job, "run_scenario()", "`await sopbus.run_scenario_async(...)`")


def run_blocking(job: Job, called: str, instead: str) -> RunOutcome:
    """Runs ``job`` to its end from a script or a notebook cell; under trio, a
    RuntimeError saying that ``called`` blocks and to use ``instead``."""
    if trio.lowlevel.in_trio_run():
        raise RuntimeError(
            f"{called} blocks, and this thread is running trio: use {instead} in a trio program"
        )
    if _asyncio_running():
        return job.in_worker_thread()
    return _finished(trio.run(job.run))


async def run_scenario_async(
    path: str | os.PathLike[str],
    /,
    *,
    environ: Mapping[str, str] | None = None,
    verbose: bool = False,
    **overrides: Any,
) -> RunOutcome:
    """:func:`run_scenario` for trio programs: ``await sopbus.run_scenario_async(path)``.
    Cancelling the caller cancels the run (it ends ``cancelled``, with its summary written)."""
    if not trio.lowlevel.in_trio_task():
        raise RuntimeError(
            "run_scenario_async() runs under trio; under asyncio use "
            "`await sopbus.run_scenario_asyncio(...)`, elsewhere run_scenario()"
        )
    job = Job.prepare(path, environ, overrides, verbose)
    return _finished(await job.run())


async def run_scenario_asyncio(
    path: str | os.PathLike[str],
    /,
    *,
    environ: Mapping[str, str] | None = None,
    verbose: bool = False,
    **overrides: Any,
) -> RunOutcome:
    """:func:`run_scenario` for asyncio programs and notebooks:
    ``result = await sopbus.run_scenario_asyncio(path)``. The run is a trio guest on the
    running asyncio loop; cancelling the awaiting task cancels the run and waits for it to
    write its summary."""
    return await run_under_asyncio(Job.prepare(path, environ, overrides, verbose))


async def run_under_asyncio(job: Job) -> RunOutcome:
    """Runs ``job`` as a trio guest on the running asyncio loop; cancelling the awaiting
    task cancels the run and waits for it to write its summary."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[trio_outcome.Outcome[RunOutcome | None]] = loop.create_future()

    def finished(result: trio_outcome.Outcome[RunOutcome | None]) -> None:
        if not done.done():
            done.set_result(result)

    # asyncio owns the signal wakeup fd in its thread; trio must leave it alone.
    trio.lowlevel.start_guest_run(
        job.run,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        done_callback=finished,
        host_uses_signal_set_wakeup_fd=True,
    )
    try:
        result = await asyncio.shield(done)
    except asyncio.CancelledError:
        job.cancel()
        await _wait_out(done)
        raise
    return _finished(result.unwrap())


class Job:
    """One prepared run: the checked scenario and its keys, and a handle to cancel it from
    another thread once it runs."""

    def __init__(self, scenario: Scenario, environ: Mapping[str, str], verbose: bool):
        self.scenario = scenario
        self.environ = environ
        self.verbose = verbose
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._lock = threading.Lock()
        self._cancelled = False

    @classmethod
    def prepare(
        cls,
        path: str | os.PathLike[str],
        environ: Mapping[str, str] | None,
        overrides: Mapping[str, Any],
        verbose: bool,
    ) -> Job:
        return cls.of(load_scenario(scenario_path(path)), environ, overrides, verbose)

    @classmethod
    def of(
        cls,
        scenario: Scenario,
        environ: Mapping[str, str] | None,
        overrides: Mapping[str, Any],
        verbose: bool,
        called: str = "run_scenario()",
    ) -> Job:
        """The run of ``scenario`` with ``overrides`` laid over it (``called`` names the
        function they were given to, in the error for an unknown one)."""
        _check_names(overrides, called)
        scenario = scenario_with_overrides(scenario, **overrides)
        from sopbus._assemble import quiet_for_the_api, run_environ

        quiet_for_the_api()
        return cls(scenario, dict(environ) if environ is not None else run_environ(), verbose)

    async def run(self) -> RunOutcome | None:
        """Runs the scenario; ``None`` when :meth:`cancel` stopped it."""
        from sopbus._assemble import execute

        with trio.CancelScope() as scope:
            with self._lock:
                self._token, self._scope = trio.lowlevel.current_trio_token(), scope
                if self._cancelled:
                    scope.cancel()
            with logger.contextualize(sopbus_verbose=self.verbose):
                done = await execute(self.scenario, environ=self.environ)
            return RunOutcome.open(done.run_dir)
        return None

    def cancel(self) -> None:
        """Cancels the run from any thread (it ends ``cancelled`` and writes its summary)."""
        with self._lock:
            self._cancelled = True
            if self._token is not None and self._scope is not None:
                self._token.run_sync_soon(self._scope.cancel)

    def in_worker_thread(self) -> RunOutcome:
        """Runs trio in a new thread and waits; Ctrl-C (or a notebook's interrupt) cancels
        the run, waits for it to end (its summary written), and is raised again."""
        box: list[trio_outcome.Outcome[RunOutcome | None]] = []
        finished = threading.Event()

        def work() -> None:
            try:
                box.append(trio_outcome.capture(trio.run, self.run))
            finally:
                finished.set()

        # Not a daemon: the interpreter waits for the run to write its summary before exiting.
        thread = threading.Thread(target=work, name="sopbus-run")
        thread.start()
        try:
            # An Event, not thread.join(): after a join() interrupted by Ctrl-C, joining
            # again returned at once on CPython 3.11 and the process exited mid-run, before
            # the run had written its summary (tests/api/test_api.py caught it).
            finished.wait()
        except KeyboardInterrupt:
            self.cancel()
            finished.wait()
            raise
        thread.join()
        return _finished(box[0].unwrap())


def _finished(result: RunOutcome | None) -> RunOutcome:
    if result is None:  # only cancel() makes it so, and its callers raise first
        raise RuntimeError("the run was cancelled")
    return result


async def _wait_out(done: asyncio.Future[Any]) -> None:
    """Waits for the trio run to end even if the awaiting task is cancelled again."""
    while not done.done():
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            continue


def _asyncio_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _check_names(overrides: Mapping[str, Any], called: str) -> None:
    for name in overrides:
        if name not in OVERRIDES:
            close = difflib.get_close_matches(name, OVERRIDES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{called} got an unknown override {name!r}: expected one "
                f"of {', '.join(OVERRIDES)}{hint}"
            )
