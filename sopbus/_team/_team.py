"""A team in plain Python: :class:`Team`, the scenario file a user would otherwise write.

A Team is its scenario: it turns its roles and settings into the tables of a scenario file
and decodes and checks them as a file is loaded (the same types, errors and ``$.paths``),
builds the team from it as ``sopbus run`` does (so a typo in ``watch`` fails here, with the
closest names), and runs it through the same assembly as :func:`sopbus.run_scenario`. Its
run directory holds the scenario as run, so ``sopbus show``, ``costs``, ``replay`` and
``verify`` read it like any other.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from sopbus.bus import ConfigError, Scenario, scenario_with_overrides
from sopbus.bus.scenario import scenario_from_tables

from .._api import Job, run_blocking, run_under_asyncio
from .._outcome import RunOutcome
from ._tables import RoleLike, check_importable, role_tables

Price = Sequence[Decimal | int | str]


class Team:
    """A team declared in Python and run as a scenario file with the same content would be::

        team = sopbus.Team(
            name="shop",
            roles=[sopbus.Role("OrderDesk", watch=["UserRequirement"], actions=[record]),
                   sopbus.Role("StockKeeper", watch=["RecordOrder"], actions=[book])],
            budget_usd=0.50,
        )
        result = team.run("A bunch of red roses, delivered today")   # a RunOutcome

    ``roles`` are ``Role("Name", watch=[...], actions=[...])`` declarations, instances of
    Role subclasses, or Role subclasses, in the order they publish in. The other keywords
    are a scenario file's keys: ``[scenario]`` (``description``, ``sop``, ``idea``), ``[run]``
    (``budget_usd``, ``max_rounds``, ``seed``, ``mode``, ``runs_dir``), ``[llm]``
    (``provider``, ``model``, ``base_url``, ``temperature``, ``max_tokens``, ``fixtures``,
    ``latency_ms``; any other key in ``llm={...}``), ``prices`` (``{model: {"input": ...,
    "output": ...}}``), ``sop_options`` (the ``[sop]`` table), ``inject`` (``[[inject]]``
    tables), ``populations`` (``[[populations]]`` tables, docs/populations.md);
    ``price=(input, output)`` prices the run's model as ``--price`` does. Left out,
    each is the file's default. Relative files (``fixtures``) are relative to ``base_dir``
    (default: the working directory), where the team's file would be.

    Every mistake is a :class:`~sopbus.ConfigError` when the team is made, worded as for a
    file (``$.roles[1].watch[0]``), but for the API key, which :meth:`run` reads.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # The SOP's team (sopbus.sops.Team) was sopbus.Team before this class took the
        # name; an SOP's build that still calls it so (no name) gets it, with a warning.
        if args or "name" not in kwargs:
            from sopbus.sops import Team as SopTeam

            warnings.warn(
                "sopbus.Team(...) without name= made an SOP's team; that is sopbus.sops.Team "
                "now: import Team from sopbus.sops in an SOP's build. sopbus.Team(name=..., "
                "roles=[...]) declares a team in Python",
                DeprecationWarning,
                stacklevel=2,
            )
            return SopTeam(*args, **kwargs)
        return super().__new__(cls)

    # long: a third of it is the signature, one keyword a line, each a scenario file's key;
    # the body maps them onto the file's tables in the file's order, read top to bottom.
    def __init__(
        self,
        *,
        name: str,
        roles: Iterable[RoleLike] = (),
        description: str | None = None,
        sop: str | None = None,
        idea: str | None = None,
        budget_usd: Decimal | float | str | None = None,
        max_rounds: int | None = None,
        seed: int | None = None,
        mode: str | None = None,
        runs_dir: str | Path | None = None,
        provider: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        fixtures: Iterable[str | Path] | None = None,
        latency_ms: int | None = None,
        llm: Mapping[str, Any] | None = None,
        price: Price | None = None,
        prices: Mapping[str, Mapping[str, Any]] | None = None,
        sop_options: Mapping[str, Any] | None = None,
        inject: Iterable[Mapping[str, Any]] | None = None,
        populations: Iterable[Mapping[str, Any]] | None = None,
        base_dir: str | Path | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"sopbus.Team(name=...): expected a non-empty name, got {name!r}")
        self.name = name
        self.shown = f"Team {name!r}"
        folder = Path.cwd() if base_dir is None else Path(base_dir)
        self.path = folder.resolve() / f"{_slug(name)}.team.toml"
        self.tables = role_tables(list(roles), self.shown)
        given_llm = {
            **dict(llm or {}),
            **_given(
                provider=provider,
                model=model,
                base_url=base_url,
                temperature=temperature,
                max_tokens=max_tokens,
                latency_ms=latency_ms,
                fixtures=None if fixtures is None else [str(f) for f in fixtures],
            ),
        }
        tables: dict[str, Any] = {
            "scenario": _given(
                name=name,
                description=description,
                sop=sop,
                idea=idea,
                # A run directory's copy names fixtures by absolute path, and a team has no
                # file of its own for replay to check them against: they may be anywhere.
                allow_outside=True if given_llm.get("fixtures") else None,
            ),
            "run": _given(
                budget_usd=budget_usd,
                max_rounds=max_rounds,
                seed=seed,
                mode=mode,
                runs_dir=None if runs_dir is None else str(runs_dir),
            ),
            "llm": given_llm,
            "prices": {k: dict(v) for k, v in (prices or {}).items()},
            "sop": dict(sop_options or {}),
            "roles": self.tables.roles,
            "actions": self.tables.actions_as_tables(),
            "inject": [dict(i) for i in inject or ()],
            "populations": [dict(p) for p in populations or ()],
        }
        with self._said_as_team():
            scenario = scenario_from_tables(
                tables, path=self.path, shown=self.shown, classes=self.tables.classes
            )
            if price is not None:
                scenario = scenario_with_overrides(scenario, price=price)
                model_priced = scenario.llm.model
                tables["prices"][model_priced] = scenario.price_table()[model_priced]
            self.scenario: Scenario = scenario
            self._tables = tables
            self.check()

    def check(self) -> None:
        """Builds the team as a run would (every name in ``watch``, ``actions`` and
        ``send_to``, the SOP); a :class:`~sopbus.ConfigError` on a mistake. Done when the
        team is made; call it again after changing a class the team uses."""
        from sopbus.sops import build_team

        with self._said_as_team():
            build_team(self.scenario)

    def run(
        self,
        idea: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        verbose: bool = False,
        **overrides: Any,
    ) -> RunOutcome:
        """Runs the team on ``idea`` (default: the team's own ``idea``) to its end and returns
        its :class:`~sopbus.RunOutcome`; ``overrides`` and ``environ`` as for
        :func:`sopbus.run_scenario` (``max_rounds=3``, ``provider="openai"``, ...). Blocks;
        works from a script and a notebook cell. In a trio program ``await``
        :meth:`run_async`, in an asyncio program :meth:`run_asyncio`."""
        job = self._job(idea, environ, verbose, overrides, "Team.run()")
        return run_blocking(job, "Team.run()", "`await team.run_async(...)`")

    async def run_async(
        self,
        idea: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        verbose: bool = False,
        **overrides: Any,
    ) -> RunOutcome:
        """:meth:`run` for trio programs; cancelling the caller cancels the run (it ends
        ``cancelled``, with its summary written)."""
        import trio

        if not trio.lowlevel.in_trio_task():
            raise RuntimeError(
                "Team.run_async() runs under trio; under asyncio use "
                "`await team.run_asyncio(...)`, elsewhere team.run()"
            )
        job = self._job(idea, environ, verbose, overrides, "Team.run_async()")
        outcome = await job.run()
        if outcome is None:
            raise RuntimeError("the run was cancelled")
        return outcome

    async def run_asyncio(
        self,
        idea: str | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        verbose: bool = False,
        **overrides: Any,
    ) -> RunOutcome:
        """:meth:`run` for asyncio programs and notebooks, as a trio guest on the running
        loop (see :func:`sopbus.run_scenario_asyncio`)."""
        job = self._job(idea, environ, verbose, overrides, "Team.run_asyncio()")
        return await run_under_asyncio(job)

    def to_toml(self, path: str | Path | None = None) -> str:
        """The scenario file of this team (written to ``path`` when given): ``sopbus run``
        of it runs the same team. Python classes are named ``"module:Class"``; one that a
        file run elsewhere could not import (a script's own, a function's local class) is a
        :class:`~sopbus.ConfigError` saying so."""
        check_importable(self.tables.classes, self.shown)
        text = msgspec.toml.encode(_without_empty(self._tables)).decode()
        header = f"# The scenario of sopbus.Team(name={self.name!r}), written by Team.to_toml().\n"
        if path is not None:
            Path(path).write_text(header + text, encoding="utf-8")
        return header + text

    def __repr__(self) -> str:
        names = ", ".join(r["name"] for r in self.tables.roles)
        return f"<sopbus.Team {self.name!r}: {names}>"

    def _job(
        self,
        idea: str | None,
        environ: Mapping[str, str] | None,
        verbose: bool,
        overrides: Mapping[str, Any],
        called: str,
    ) -> Job:
        given = {**overrides, **({} if idea is None else {"idea": idea})}
        with self._said_as_team():
            return Job.of(self.scenario, environ, given, verbose, called=called)

    @contextmanager
    def _said_as_team(self) -> Iterator[None]:
        """Errors about the scenario name the team, not the file it has no copy of."""
        try:
            yield
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(f"{self.path}: ", f"{self.shown}: ")) from None


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("._") or "team"


def _without_empty(value: Any) -> Any:
    """The file's tables without unset keys (``None``) and empty tables and lists."""
    if isinstance(value, dict):
        kept = {k: _without_empty(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in kept.items() if v != {} and v != []}
    if isinstance(value, (list, tuple)):
        return [_without_empty(v) for v in value]
    if isinstance(value, Decimal):  # as a file writes money: 0.5, not "0.5"
        return float(value) if Decimal(repr(float(value))) == value else str(value)
    return value
