"""Where everything is put together: a scenario becomes a team, a provider, a gateway, a
run store and a run. The engine (``sopbus.bus``) knows neither roles nor SOPs; this is where
they meet it.

:func:`execute` is the programmatic entry: the Python API, the command line
(:mod:`sopbus.cli._running` adds the progress display, the summary table and the exit code)
and a sweep's runs all call it.

Every run keeps its LLM answers in ``calls.jsonl`` and the reservation of each call in its
event log (:class:`sopbus.bus.llm._tape.CallLog`), so it can be resumed, replayed and forked. Those
commands pass :func:`execute` a :class:`sopbus.bus.store._resume.Continuation`: which directory to write
(the same one for a resume), which answers come from a recording, what spend carries over.

Which provider a scenario calls and what its models cost is :mod:`sopbus._assemble._provider`; the
log lines and ``run.log`` are :mod:`sopbus._assemble._logs`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
from loguru import logger

from sopbus.bus import (
    SANDBOX_SCRATCH,
    SUMMARY,
    Environment,
    Provider,
    RunEnded,
    Runner,
    RunStarted,
    RunSummary,
    ToolServerError,
    decode_summary,
    reached,
    redact_url,
)
from sopbus.bus.llm import Gateway
from sopbus.bus.money import Budget, PriceBook
from sopbus.bus.sandbox import SandboxSettings, check_backend, sweep_stale
from sopbus.bus.sandbox import using as sandbox_using
from sopbus.bus.scenario import Scenario, scenario_to_builtins
from sopbus.bus.store import RunStore, seal_key, write_keyed_seal

from ._logs import FILE_FORMAT, RedactedFile, redacting_stderr
from ._progress import Progress
from ._provider import (
    checked_prices,
    endpoint,
    make_provider,
    opened_for_run,
    prompt_counter,
    provider_spec,
    run_secrets,
    with_people,
)
from ._reach import check_endpoint
from ._worst import Worst, refuse_short_cap, worst_cases, worst_lines

if TYPE_CHECKING:
    from sopbus.bus.money import AccountShare
    from sopbus.bus.store import Continuation

    from ._bus import BusOptions


class Outcome(NamedTuple):
    """A finished run: its directory and the summary written there (read back as it is
    kept, so a caller sees what ``sopbus runs`` and :class:`sopbus.RunOutcome` see)."""

    summary: RunSummary
    run_dir: Path


async def execute(
    scenario: Scenario,
    *,
    record: Path | None = None,
    progress: bool = False,
    environ: Mapping[str, str] | None = None,
    continuation: Continuation | None = None,
    human_input: Path | None = None,
    run_id: str | None = None,
    pool: AccountShare | None = None,
    bus: BusOptions | None = None,
) -> Outcome:
    """Builds and runs ``scenario``; every configuration mistake is raised as
    :class:`~sopbus.bus.ConfigError` before any call is made or any run directory is created
    (or, with a ``continuation``, changed). ``environ`` holds the keys and endpoints
    (default ``os.environ``; the CLI and the Python API pass :func:`~sopbus._assemble._environ.run_environ`),
    and the seal key (``SOPBUS_SEAL_KEY``: :mod:`sopbus.bus.store._keyed`), if any.
    ``run_id`` names a new run's directory (a sweep's runs); ``pool`` is a sweep's shared
    account, drawn on by every call besides the run's own budget. ``bus`` runs the team
    over NATS, with roles on workers (:mod:`sopbus._assemble._bus`)."""
    env = os.environ if environ is None else environ
    live = continuation is None or continuation.live
    checked = preflight(scenario, env, live=live)
    if live:  # a replay calls no server; every other run needs one that is there
        await check_endpoint(scenario, provider_spec(scenario), env)
    if continuation is None:  # a resume or a replay goes on within what was spent
        refuse_short_cap(scenario, checked.worst)
        if bus is None or not bus.url:
            from ._shards import refuse_shards_in_one_process

            refuse_shards_in_one_process(scenario)
    provider = _provider(checked, human_input, continuation)
    for warning in checked.warnings:
        logger.warning(warning)
    for line in worst_lines(checked.worst, scenario.run.budget_usd):
        logger.info(line)
    store = _open_store(scenario, continuation, run_id)
    key = seal_key(env)
    store.hide((*run_secrets(scenario, env), *([key.decode()] if key else [])))
    run = _Run(scenario, checked.team, checked.prices, provider, store, continuation, pool, bus)
    with _recorded(scenario, store):
        await run.run(record, progress)
    if key is not None:
        write_keyed_seal(store.run_dir, key)
    return Outcome(decode_summary((store.run_dir / SUMMARY).read_bytes()), store.run_dir)


def _provider(
    checked: Preflight, human_input: Path | None, continuation: Continuation | None
) -> Provider:
    """The run's provider, with the people of its roles in front (``None`` from the
    preflight: not live, every answer comes from the recording)."""
    if checked.provider is None:
        from sopbus.bus.store import Unplugged

        return Unplugged()
    return with_people(
        checked.provider, checked.team.roles, human_input, required=continuation is None
    )


def _open_store(
    scenario: Scenario, continuation: Continuation | None, run_id: str | None
) -> RunStore:
    """The run's directory: the continued run's, or a new one, locked against a second
    writer."""
    if continuation is not None:
        return continuation.open_store()
    store = RunStore.create(Path(scenario.run.runs_dir), scenario.name, run_id=run_id)
    store.lock()
    return store


@contextmanager
def _recorded(scenario: Scenario, store: RunStore) -> Iterator[None]:
    """The run's ``run.log``, its log lines bound to its id, its sandbox and stderr with
    its secrets hidden; the store closed (and an empty scratch directory removed) after."""
    sink_id = logger.add(
        RedactedFile(store.run_dir / "run.log", store.redact),
        level="DEBUG",
        enqueue=False,
        format=FILE_FORMAT,
        filter=lambda record: record["extra"].get("run_id") == store.run_id,
    )
    try:
        with (
            logger.contextualize(run_id=store.run_id),
            sandbox_using(_sandbox(scenario, store)),
            redacting_stderr(store.redact),
        ):
            yield
    finally:
        logger.remove(sink_id)
        _remove_if_empty(store.run_dir / SANDBOX_SCRATCH)
        store.close()


class Preflight(NamedTuple):
    """What :func:`preflight` found: the team, the prices, the provider (``None`` when the
    run is not live) and warnings for the user (a fixture written for another idea)."""

    team: Any
    prices: PriceBook
    provider: Provider | None
    warnings: list[str]
    worst: list[Worst] = []  # noqa: RUF012  (a NamedTuple's default, never changed in place)


def preflight(scenario: Scenario, environ: Mapping[str, str], *, live: bool = True) -> Preflight:
    """Every check ``sopbus run`` makes before it starts, each a :class:`~sopbus.bus.ConfigError`:
    the team (names in ``watch``, ``actions`` and ``send_to``), a price for every model it
    can call, the sandbox backend, the provider's settings (fixture files, a cassette, an
    API key). ``sopbus validate`` calls this too, so a file it passes is one ``run`` starts."""
    from sopbus.bus.llm import idea_warnings
    from sopbus.sops import build_team

    from ._tools import check_launch, check_named

    team = build_team(scenario)
    check_named(scenario, team)
    if live:
        check_launch(scenario, team, os.environ)
    callers = [*team.roles, *team.populations]
    prices = checked_prices(scenario, callers, endpoint=endpoint(scenario, environ))
    check_backend(scenario.sandbox.backend, where=f"{scenario.path}: [sandbox].backend")
    provider = make_provider(scenario, environ) if live else None
    simulated = provider_spec(scenario).simulated  # fixtures answer the idea's calls
    warnings = idea_warnings(scenario.idea, scenario.fixture_paths()) if simulated else []
    return Preflight(team, prices, provider, warnings, worst_cases(scenario, team, prices))


@dataclass(frozen=True)
class _Run:
    """One run being assembled: what :func:`execute` checked and opened."""

    scenario: Scenario
    team: Any
    prices: PriceBook
    provider: Provider
    store: RunStore
    continuation: Continuation | None
    pool: AccountShare | None
    bus: BusOptions | None

    @property
    def live(self) -> bool:
        """Calls reach a provider and tools start (not a replay from the recording)."""
        return self.continuation is None or self.continuation.live

    async def run(self, record: Path | None, progress: bool) -> RunSummary:
        """Logs the start, opens the provider, the bus and the tool servers, and runs the
        team to its end; tool servers that do not start end it ``error``."""
        from ._bus import coordinated
        from ._tools import in_workspace, opened_tools

        as_run = self._started()
        scenario = in_workspace(
            self.scenario, self.team, self.store.run_dir.resolve(), live=self.live
        )
        started = time.time()
        try:
            async with (
                opened_for_run(self.provider, record, self.store.redactor) as live,
                coordinated(self.bus, scenario, as_run, self.store, self.continuation) as remote,
                opened_tools(scenario, self.team, live=self.live) as sources,
            ):
                return await self._team(scenario, live, remote, sources, progress)
        except ToolServerError as error:  # a server did not start (a crash later fails a turn)
            return _servers_failed(scenario, self.store, error, started)

    def _started(self) -> str:
        """Logs ``run_started`` and writes the scenario as run; returns its text."""
        scenario, store = self.scenario, self.store
        as_run = scenario_as_run(scenario)
        store.log(
            RunStarted(
                run_id=store.run_id,
                scenario=scenario.name,
                mode=scenario.run.mode,
                seed=scenario.run.seed,
                max_rounds=scenario.run.max_rounds,
                settings={
                    "provider": scenario.llm.provider,
                    "model": scenario.llm.model,
                    "budget_usd": str(scenario.run.budget_usd),
                    "sop": scenario.sop,
                    "scenario_path": str(scenario.path),
                    # The file written next, so that verify finds it edited or replaced.
                    "scenario_sha256": store.scenario_digest(as_run),
                },
            )
        )
        # After run_started, which says where the scenario came from: a run killed between the
        # two has no scenario.toml and is started anew; one with it can always be resumed.
        reached("run:started")
        store.write_scenario(as_run)
        return as_run

    async def _team(
        self, scenario: Scenario, live: Provider, remote: Any, sources: Any, progress: bool
    ) -> RunSummary:
        """The gateway, the tools and the environment of the run, then the run loop."""
        from sopbus.bus.llm import CallLog

        from ._shards import shard_counts

        store, continuation = self.store, self.continuation
        journal = CallLog(store, first_call=continuation.first_call if continuation else 0)
        gateway = Gateway(
            live,
            self.prices,
            Budget(scenario.run.budget_usd),
            sink=store.record_call,
            max_attempts=scenario.llm.max_attempts,
            journal=journal,
            pool=self.pool or remote.pool,
            counter=prompt_counter(live),
        )
        asker: Any = gateway if continuation is None else continuation.wrap(gateway, store)
        # A stop condition that watches spend or tokens (group chat's limits) reads them from
        # this run's gateway, which exists only now.
        bind_stats = getattr(self.team.stop, "bind_stats", None)
        if callable(bind_stats):
            bind_stats(gateway.stats if continuation is None else asker.course)
        # The store takes a publish at once (over NATS: and puts its messages on the stream).
        env = Environment(store.run_id, log=remote.log or store)
        env.add_all(
            await remote.members(
                self.team.roles,
                gateway,
                journal,
                self.team.populations,
                shard_counts(scenario),
            )
        )
        env.add_all(self.team.populations)  # one member each, after the roles
        if continuation is not None:
            continuation.ledger_lost(gateway, answered=remote.adopted)
        runner = self._runner(scenario, env, asker, self._toolbox(sources, gateway))
        if not progress:
            return await runner.run()
        async with Progress(env, gateway, scenario, store.run_dir, runner) as shown:
            self._shown(shown)
            return await runner.run()

    def _toolbox(self, sources: Any, gateway: Gateway) -> Any:
        """The run's tools, answered from the recording where the continuation has them."""
        from sopbus.bus.llm import ToolBox

        from ._tools import named_tools

        continuation = self.continuation
        tools = ToolBox(
            sources,
            gateway=gateway,
            store=self.store,
            lists=tuple(continuation.tape.lists.values()) if continuation else (),
            tape=continuation.tape if continuation else None,
            free=continuation.free if continuation else False,
            taped_through=continuation.taped_through if continuation else 0,
        )
        if named_tools(self.team):  # a run without tools keeps its recording as it was
            tools.record_lists()
        return tools

    def _runner(self, scenario: Scenario, env: Environment, asker: Any, tools: Any) -> Runner:
        team, continuation = self.team, self.continuation
        summary = _summary_fields(scenario, self.store) | (
            continuation.summary if continuation else {}
        )
        return Runner(
            env,
            mode=scenario.run.mode,
            max_rounds=scenario.run.max_rounds,
            seed=team.seed,
            injections=team.injections,
            stop=team.stop,
            gateway=asker,
            store=self.store,
            summary=summary,
            judge=team.verdict,
            finish=team.finish,
            tools=tools,
        )

    def _shown(self, shown: Progress) -> None:
        """Lets the live display pause for a person's answer and show a streamed one."""
        person = self.provider.human
        if person is not None:
            person.pause, shown.person = shown.paused, person
        self.provider.show_live(shown.live)


def _servers_failed(
    scenario: Scenario, store: RunStore, error: ToolServerError, started: float
) -> RunSummary:
    """The end of a run whose tool servers did not start: said in the log and the summary
    (failed, end reason ``error``), everything written before kept."""
    logger.error("{}", error)
    store.log(RunEnded(round=0, reason="error", detail=str(error), error=str(error)))
    fields = _summary_fields(scenario, store)
    summary = RunSummary(
        run_id=store.run_id,
        status="failed",
        end_reason="error",
        detail=str(error),
        error=str(error),
        mode=scenario.run.mode,
        max_rounds=scenario.run.max_rounds,
        budget_usd=scenario.run.budget_usd,
        started_at=started,
        ended_at=time.time(),
        duration_s=round(time.time() - started, 3),
        **fields,
    )
    store.write_summary(summary)
    return summary


def scenario_as_run(scenario: Scenario) -> str:
    """The scenario with the CLI's overrides applied, as a TOML file that loads again from
    the run directory: files it names are made absolute, unset (``None``) keys left out."""
    doc = scenario_to_builtins(scenario)
    doc.pop("path", None)
    llm = doc["llm"]
    if llm.get("base_url"):
        llm["base_url"] = redact_url(llm["base_url"])
    llm["fixtures"] = [str(p) for p in scenario.fixture_paths()]
    if scenario.cassette_path() is not None:
        llm["cassette"] = str(scenario.cassette_path())
    text: str = msgspec.toml.encode(_without_none(doc)).decode()
    return f"# The scenario as run ({scenario.path}, with command-line overrides).\n{text}"


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_without_none(v) for v in value]
    return value


def _sandbox(scenario: Scenario, store: RunStore) -> SandboxSettings:
    """The run's sandbox: its scratch directories under the run directory (stale ones of a
    killed sopbus removed first); code from a real model (not the simulator) is untrusted."""
    root = store.run_dir / SANDBOX_SCRATCH
    for stale in Path(scenario.run.runs_dir).glob(f"*/{SANDBOX_SCRATCH}"):
        sweep_stale(stale)
        _remove_if_empty(stale)
    return SandboxSettings(
        backend=scenario.sandbox.backend,
        scratch_root=root,
        untrusted=not provider_spec(scenario).simulated,
        scratch_mb=scenario.sandbox.scratch_mb,
        tmp_mb=scenario.sandbox.tmp_mb,
    )


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass  # not there, or a live run's scratch directories are in it


def _summary_fields(scenario: Scenario, store: RunStore) -> dict[str, Any]:
    return {
        "scenario": scenario.name,
        "scenario_path": str(scenario.path),
        "sop": scenario.sop,
        "provider": scenario.llm.provider,
        "model": scenario.llm.model,
        "seed": scenario.run.seed,
        "run_dir": str(store.run_dir),
    }
