"""Where everything is put together: a scenario becomes a team, a provider, a gateway, a
run store and a run. The one module of ``bus`` that imports ``roles`` and ``sops`` (the
CLI is the assembly point; the engine itself knows neither).

:func:`execute` is the programmatic entry (tests and other tools call it); :func:`run_scenario`
is ``sopbus run``: it adds the progress display, the summary table and the exit code.

Every run keeps its LLM answers in ``calls.jsonl`` and the reservation of each call in its
event log (:class:`bus.llm._tape.CallLog`), so it can be resumed, replayed and forked. Those
commands pass :func:`execute` a :class:`bus.store._resume.Continuation`: which directory to write
(the same one for a resume), which answers come from a recording, what spend carries over.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import trio
from loguru import logger

from .. import _events as ev
from ..money._budget import Budget
from .._environment import Environment
from .._errors import ConfigError
from ..llm._gateway import Gateway
from .._layout import SANDBOX_SCRATCH, SUMMARY
from .._redact import MASK, redact_url, url_secrets
from .._protocol import Provider
from ..money._prices import PriceBook
from .._run import Runner, RunResult
from ..scenario._load import scenario_to_builtins
from ..scenario._types import Scenario
from ..sandbox import SandboxSettings, check_backend, sweep_stale
from ..sandbox import using as sandbox_using
from ..store._store import RunStore
from ._exit import ExitCode
from ._progress import Progress

if TYPE_CHECKING:
    from ..money._account import AccountShare
    from ..store._resume import Continuation
    from ._bus import BusOptions


class Outcome(NamedTuple):
    """A finished run: its result, its directory and the summary written there."""

    result: RunResult
    run_dir: Path
    summary: dict[str, Any]


EXIT = {"completed": ExitCode.COMPLETED, "failed": ExitCode.FAILED,
        "budget_exhausted": ExitCode.BUDGET_EXHAUSTED, "cancelled": ExitCode.INTERRUPTED}


def run_scenario(scenario: Scenario, args: argparse.Namespace,
                 continuation: Continuation | None = None) -> int:
    """``sopbus run`` (and resume, replay, fork with a ``continuation``): the run with live
    progress, then the summary; returns the exit code."""
    from ..otel import check_available, wanted
    from ._environ import run_environ

    quiet = bool(getattr(args, "quiet", False))
    if wanted(bool(getattr(args, "otel", False)), os.environ):
        check_available()  # a missing extra is said before the run, not after it
    environ = run_environ()  # keys and endpoints: the environment over ./.env
    _configure_logging(quiet, verbose=bool(getattr(args, "verbose", False)))
    from ._bus import bus_options

    bus = bus_options(args)  # --bus: a NATS server that cannot be reached is said here
    outcome = trio.run(lambda: execute(scenario, record=getattr(args, "record", None),
                                       progress=not quiet, environ=environ,
                                       continuation=continuation,
                                       human_input=getattr(args, "human_input", None), bus=bus))
    from ._summary import print_summary

    print_summary(outcome.summary, outcome.run_dir)
    _send_trace(args, outcome.run_dir)
    if getattr(args, "report", False):
        from ._cmd_report import write

        print(f"report: {write(outcome.run_dir, None)}")
    return int(exit_code(outcome.result))


def exit_code(result: RunResult) -> ExitCode:
    """The exit code of a finished run: by its status, and 4 for a run that completed
    but whose verdict failed (it ended normally and still missed its purpose)."""
    if result.status == "completed" and result.verdict is not None and not result.verdict.passed:
        return ExitCode.VERDICT_FAILED
    return EXIT[result.status]


def _send_trace(args: argparse.Namespace, run_dir: Path) -> None:
    """``--otel`` (or a standard OTLP endpoint variable): the run's trace, from its log. A
    collector that is down costs a warning, never the run's result."""
    from ..otel import wanted

    if wanted(bool(getattr(args, "otel", False)), os.environ):
        from ._cmd_export_otel import send

        send(run_dir, None)


async def execute(scenario: Scenario, *, record: Path | None = None, progress: bool = False,
                  environ: Mapping[str, str] | None = None,
                  continuation: Continuation | None = None,
                  human_input: Path | None = None, run_id: str | None = None,
                  pool: AccountShare | None = None, bus: BusOptions | None = None) -> Outcome:
    """Builds and runs ``scenario``; every configuration mistake is raised as
    :class:`~bus.ConfigError` before any call is made or any run directory is created
    (or, with a ``continuation``, changed). ``environ`` holds the keys and endpoints
    (default ``os.environ``; the CLI and the Python API pass :func:`~bus.cli._environ.run_environ`).
    ``run_id`` names a new run's directory (a sweep's runs); ``pool`` is a sweep's shared
    account, drawn on by every call besides the run's own budget. ``bus`` runs the team
    over NATS, with roles on workers (:mod:`bus.cli._bus`)."""
    env = os.environ if environ is None else environ
    checked = preflight(scenario, env, live=continuation is None or continuation.live)
    team, prices = checked.team, checked.prices
    if checked.provider is None:
        from ..store._resume import Unplugged

        provider: Provider = Unplugged()
    else:
        provider = _with_people(checked.provider, team.roles, human_input,
                                required=continuation is None)
    for warning in checked.warnings:
        logger.warning(warning)
    if continuation is not None:
        store = continuation.open_store()
    else:
        store = RunStore.create(Path(scenario.run.runs_dir), scenario.name, run_id=run_id)
        store.lock()
    store.hide(run_secrets(scenario, env))
    sink_id = logger.add(_RedactedFile(store.run_dir / "run.log", store.redact), level="DEBUG",
                         enqueue=False, format=_FILE_FORMAT,
                         filter=lambda record: record["extra"].get("run_id") == store.run_id)
    try:
        with logger.contextualize(run_id=store.run_id), sandbox_using(_sandbox(scenario, store)), \
                _redacting_stderr(store.redact):
            result = await _run(scenario, team, prices, provider, store, record, progress,
                                continuation, pool, bus)
        if team.finish is not None:
            team.finish(store.artifacts_dir)
    finally:
        logger.remove(sink_id)
        _remove_if_empty(store.run_dir / SANDBOX_SCRATCH)
        store.close()
    summary = msgspec.json.decode((store.run_dir / SUMMARY).read_bytes())
    return Outcome(result, store.run_dir, summary)


class Preflight(NamedTuple):
    """What :func:`preflight` found: the team, the prices, the provider (``None`` when the
    run is not live) and warnings for the user (a fixture written for another idea)."""

    team: Any
    prices: PriceBook
    provider: Provider | None
    warnings: list[str]


def preflight(scenario: Scenario, environ: Mapping[str, str], *, live: bool = True) -> Preflight:
    """Every check ``sopbus run`` makes before it starts, each a :class:`~bus.ConfigError`:
    the team (names in ``watch``, ``actions`` and ``send_to``), a price for every model it
    can call, the sandbox backend, the provider's settings (fixture files, a cassette, an
    API key). ``sopbus validate`` calls this too, so a file it passes is one ``run`` starts."""
    from sops import build_team

    from ..llm._fixtures import idea_warnings

    team = build_team(scenario)
    prices = _checked_prices(scenario, team.roles, endpoint=endpoint(scenario, environ))
    check_backend(scenario.sandbox.backend, where=f"{scenario.path}: [sandbox].backend")
    provider = make_provider(scenario, environ) if live else None
    warnings = (idea_warnings(scenario.idea, scenario.fixture_paths())
                if scenario.llm.provider == "sim" else [])
    return Preflight(team, prices, provider, warnings)


async def _run(scenario: Scenario, team: Any, prices: PriceBook, provider: Provider,
               store: RunStore, record: Path | None, progress: bool,
               continuation: Continuation | None, pool: AccountShare | None = None,
               bus: BusOptions | None = None) -> RunResult:
    from ..llm._tape import CallLog
    from ._bus import coordinated

    as_run = scenario_as_run(scenario)
    store.write_scenario(as_run)
    store.log(ev.RunStarted(run_id=store.run_id, scenario=scenario.name, mode=scenario.run.mode,
                            seed=scenario.run.seed, max_rounds=scenario.run.max_rounds,
                            settings={"provider": scenario.llm.provider, "model": scenario.llm.model,
                                      "budget_usd": str(scenario.run.budget_usd), "sop": scenario.sop,
                                      "scenario_path": str(scenario.path)}))
    async with _opened(provider, record) as live, \
            coordinated(bus, scenario, as_run, store, continuation) as remote:
        journal = CallLog(store, first_call=continuation.first_call if continuation else 0)
        gateway = Gateway(live, prices, Budget(scenario.run.budget_usd), sink=store.record_call,
                          max_attempts=scenario.llm.max_attempts, journal=journal,
                          pool=pool or remote.pool)
        asker: Any = gateway if continuation is None else continuation.wrap(gateway, store)
        summary = _summary_fields(scenario, store) | (continuation.summary if continuation else {})
        # A stop condition that watches spend or tokens (group chat's limits) reads them from
        # this run's gateway, which exists only now.
        bind_stats = getattr(team.stop, "bind_stats", None)
        if callable(bind_stats):
            bind_stats(gateway.stats if continuation is None else asker.course)
        # The store takes a publish at once (over NATS: and puts its messages on the stream).
        env = Environment(store.run_id, log=remote.log or store)
        env.add_all(await remote.members(team.roles, gateway, journal))
        runner = Runner(env, mode=scenario.run.mode, max_rounds=scenario.run.max_rounds,
                        seed=team.seed, injections=team.injections, stop=team.stop,
                        gateway=asker, store=store, summary=summary, judge=team.verdict)
        if not progress:
            return await runner.run()
        async with Progress(env, gateway, scenario, store.run_dir, runner) as shown:
            person = getattr(provider, "human", None)
            if person is not None:
                person.pause, shown.person = shown.paused, person
            streaming = _innermost(provider)
            if getattr(streaming, "stream", False) and hasattr(streaming, "live"):
                streaming.live = shown.live
            return await runner.run()


def _innermost(provider: Any) -> Any:
    """The provider behind the wrappers (a person's router, a cassette recorder)."""
    while hasattr(provider, "inner"):
        provider = provider.inner
    return provider


def _with_people(provider: Provider, roles: list[Any], human_input: Path | None, *,
                 required: bool) -> Provider:
    """The run's provider, with a person answering the roles declared ``human = true``."""
    humans = [role.name for role in roles if getattr(role, "human", False)]
    if not humans:
        return provider
    from ..llm._human import HumanProvider, HumanRouter, answers_for

    answers = answers_for(human_input, interactive=sys.stdin.isatty(), humans=humans,
                          required=required)
    return HumanRouter(provider, HumanProvider(answers))


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
    return SandboxSettings(backend=scenario.sandbox.backend, scratch_root=root,
                           untrusted=scenario.llm.provider != "sim")


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass  # not there, or a live run's scratch directories are in it


def _summary_fields(scenario: Scenario, store: RunStore) -> dict[str, Any]:
    return {"scenario": scenario.name, "scenario_path": str(scenario.path), "sop": scenario.sop,
            "provider": scenario.llm.provider, "model": scenario.llm.model,
            "seed": scenario.run.seed, "run_dir": str(store.run_dir)}


def _checked_prices(scenario: Scenario, roles: list[Any], *, endpoint: str | None = None) -> PriceBook:
    """The price book, with every model the team can call priced (else a ConfigError that
    names the model and the fix) before any call is made. ``endpoint`` (see :func:`endpoint`)
    lets genai-prices price a model at the provider that serves it."""
    prices = PriceBook.load(scenario.price_table(), endpoint=endpoint)
    models = {scenario.llm.model} | {m for role in roles for m in role.models() if m}
    for model in sorted(models):
        try:
            prices.price(model)
        except ConfigError as exc:
            raise ConfigError(f"{scenario.path}: {exc}") from None
    return prices


def endpoint(scenario: Scenario, environ: Mapping[str, str]) -> str | None:
    """The URL the ``openai`` provider will call (``[llm].base_url``, else
    ``OPENAI_BASE_URL``, else OpenAI's), its credentials blanked; ``None`` for the other
    providers."""
    if scenario.llm.provider != "openai":
        return None
    from ..llm._openai import DEFAULT_BASE_URL, openai_settings_from_env

    # Redacted: prices only need the host, and the quote names the endpoint it came from.
    return redact_url(scenario.llm.base_url or openai_settings_from_env(environ).base_url or DEFAULT_BASE_URL)


def make_provider(scenario: Scenario, environ: Mapping[str, str]) -> Provider:
    """The provider ``[llm].provider`` names, configured from the scenario and (for
    ``openai``) the environment: ``OPENAI_API_KEY``, and ``OPENAI_BASE_URL`` when the
    scenario gives no ``base_url``."""
    llm = scenario.llm
    if llm.provider == "sim":
        from ..llm._fixtures import load_fixtures
        from ..llm._sim import SimProvider

        return SimProvider(seed=scenario.run.seed, latency_ms=llm.latency_ms,
                           fixtures=load_fixtures(scenario.fixture_paths()), stream=llm.stream)
    if llm.provider == "replay":
        from ..llm._replay import ReplayProvider

        cassette = scenario.cassette_path()
        if cassette is None:
            raise ConfigError(f"{scenario.path}: provider 'replay' needs a cassette: set "
                              f"[llm].cassette to a file recorded with `sopbus run --record FILE`")
        return ReplayProvider(cassette)
    from ..llm._openai import OpenAIProvider, openai_settings_from_env

    env = openai_settings_from_env(environ)
    if not env.api_key:
        raise ConfigError(f"{scenario.path}: provider 'openai' needs an API key: set "
                          f"OPENAI_API_KEY in the environment or in a .env file in the working "
                          f"directory (any value for a local server)")
    return OpenAIProvider(base_url=_whole_url(scenario, env.base_url), api_key=env.api_key,
                          timeout_s=llm.timeout_s, stream=llm.stream,
                          max_tokens_param=llm.max_tokens_param)


def _whole_url(scenario: Scenario, from_env: str | None) -> str | None:
    """The base URL to call. A run keeps its URL with the credentials blanked
    (``http://***@host/v1``), so a resumed, replayed or forked run takes the whole URL from
    ``OPENAI_BASE_URL`` when that is the same URL with credentials."""
    url = scenario.llm.base_url
    if url is None or MASK not in url:
        return url or from_env
    if from_env is not None and redact_url(from_env) == url:
        return from_env
    raise ConfigError(f"{scenario.path}: the base URL {url} had credentials, which a run does "
                      f"not keep; set OPENAI_BASE_URL to the whole URL to run it again")


@asynccontextmanager
async def _opened(provider: Provider, record: Path | None) -> AsyncIterator[Provider]:
    """The provider, opened for the run (and wrapped in a recorder with ``--record``)."""
    if record is not None:
        from ..llm._replay import RecordingProvider

        provider = RecordingProvider(provider, record)
    if hasattr(provider, "__aenter__"):
        async with provider:  # type: ignore[attr-defined]
            yield provider
    else:
        yield provider


def run_secrets(scenario: Scenario, environ: Mapping[str, str]) -> tuple[str, ...]:
    """What a run must never write: the credentials in its base URL (the scenario's or
    ``OPENAI_BASE_URL``) and the API key (see :mod:`bus._redact`)."""
    from ..llm._openai import openai_settings_from_env

    env = openai_settings_from_env(environ)
    key = env.api_key if env.api_key and len(env.api_key) >= 8 else None
    return (*url_secrets(scenario.llm.base_url or env.base_url), *([key] if key else []))


_FILE_FORMAT = "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}"
_redact_stderr: list[Callable[[str], str]] = []  # the runs executing now (one, from the CLI)


class _RedactedFile:
    """A loguru sink: the run's ``run.log``, each line with the run's secrets blanked."""

    def __init__(self, path: Path, redact: Callable[[str], str]):
        self._path, self._redact = path, redact

    def write(self, message: str) -> None:
        with open(self._path, "a", encoding="utf-8") as f:
            f.write(self._redact(message))


@contextmanager
def _redacting_stderr(redact: Callable[[str], str]) -> Iterator[None]:
    _redact_stderr.append(redact)
    try:
        yield
    finally:
        _redact_stderr.remove(redact)


def _to_stderr(line: str) -> None:
    for redact in _redact_stderr:
        line = redact(line)
    sys.stderr.write(line)


def _configure_logging(quiet: bool, verbose: bool = False) -> None:
    """Human-readable lines to stderr; the cost line after each call only with ``-v``
    (about 125 characters, they wrap under the live view); ``--quiet`` keeps only
    warnings. Each run also gets ``run.log`` in its directory, with every line (see
    :func:`execute`)."""
    logger.remove()
    # Written through sys.stderr at call time, so that rich's live display can keep them above it.
    logger.add(_to_stderr, level="WARNING" if quiet else "INFO",
               colorize=sys.stderr.isatty(),
               filter=lambda record: verbose or not record["extra"].get("cost"),
               format="<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}")
