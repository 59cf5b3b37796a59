"""``sopbus replay`` and ``sopbus fork``: an earlier run again, from its own recording.

Both run the earlier run's scenario (``runs/<id>/scenario.toml``) from round 1 into a new
run directory, with a :class:`sopbus.bus.llm._tape.TapeGateway` in front of the gateway that answers
from the earlier run's ``calls.jsonl``. Taped answers are ledgered ``replayed`` at $0 and
recorded into the new run's own ``calls.jsonl``, so the new run can be replayed, resumed
or forked in turn.

* A replay takes every answer from the recording (matched by round, role and request) and
  has no provider at all: zero cost, and in ``rounds`` mode the same messages in the same
  order. A call the recording cannot answer ends the replay with an error that says so.
* A fork at round N takes the answers of rounds 1..N from the recording (matched by round
  and role in order, whatever the request says: ``--set llm.model=...`` changes the request
  but not what the forked run saw up to round N), so the state after round N is the forked
  run's, at no cost and with no provider call. From round N+1 on it runs live with the
  changed settings. ``--set`` takes a dotted key of the scenario file (``llm.model``,
  ``run.budget_usd``, ``run.max_rounds``, ``roles.0.llm.model``, an entry of a list named by
its ``name``: ``populations.Player.count``...) and a TOML value (a bare
  word is a string). ``--set inject=TEXT`` (or an inline table such as
  ``{ content = "...", send_to = ["Alex"] }``) publishes a message at round N+1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from .._errors import ConfigError
from .._events import Note
from .._util import CALLS, closest, read_jsonl
from ..llm import EVERY_ROUND, Tape, read_recording
from ..scenario import Scenario, ScenarioDoc, check_scenario, scenario_to_builtins
from ._resume import Continuation, ledger_of, scenario_of
from ._store import EVENTS, new_run_id


def plan_replay(run_dir: Path, *, into: Path | None = None) -> tuple[Scenario, Continuation]:
    """The scenario and continuation that replay the run in ``run_dir`` into a new run
    directory in the folder ``into`` (default: beside the run)."""
    scenario = scenario_of(run_dir)
    recording = read_recording(run_dir / CALLS)
    calls = recording.calls
    target = _new_run_dir(run_dir, scenario, "replay", into)
    note = Note(kind="replaying", round=0, role="", data={"of": run_dir.name, "calls": len(calls)})
    return scenario, Continuation(
        run_dir=target,
        tape=Tape(
            calls,
            match="key",
            refused=ledger_of(run_dir),
            tools=recording.tools,
            lists=recording.lists,
        ),
        free=True,
        taped_through=EVERY_ROUND,
        note=note,
        summary={"replay_of": run_dir.name},
        live=False,
    )


def plan_fork(
    run_dir: Path, *, at_round: int, settings: tuple[str, ...] = (), into: Path | None = None
) -> tuple[Scenario, Continuation]:
    """The scenario (with ``settings`` laid over it) and continuation that fork the run in
    ``run_dir`` after round ``at_round`` into a new run directory in the folder ``into``
    (default: beside the run)."""
    done = completed_rounds(run_dir)
    if not 0 <= at_round <= done:
        raise ConfigError(
            f"--at-round {at_round}: run {run_dir.name} completed rounds 1 to {done}, "
            f"so a fork can start after round 0 to {done}"
        )
    scenario = with_settings(scenario_of(run_dir), settings, at_round=at_round)
    recording = read_recording(run_dir / CALLS)
    calls = [c for c in recording.calls if c.round <= at_round]
    tools = [t for t in recording.tools if t.round <= at_round]
    target = _new_run_dir(run_dir, scenario, "fork", into)
    note = Note(
        kind="forked",
        round=at_round,
        role="",
        data={
            "from": run_dir.name,
            "at_round": at_round,
            "settings": list(settings),
            "taped_calls": len(calls),
        },
    )
    return scenario, Continuation(
        run_dir=target,
        tape=Tape(
            calls, match="turn", refused=ledger_of(run_dir), tools=tools, lists=recording.lists
        ),
        free=True,
        taped_through=at_round,
        note=note,
        summary={"forked_from": run_dir.name, "fork_round": at_round},
    )


def completed_rounds(run_dir: Path) -> int:
    """The last round the run finished, over all its executions (``round_ended`` events)."""
    logs = [run_dir / EVENTS, *run_dir.glob("events.*.jsonl")]
    return max(
        (
            e["round"]
            for log in logs
            if log.is_file()
            for e in read_jsonl(log, dict)
            if e.get("kind") == "round_ended"
        ),
        default=0,
    )


def with_settings(scenario: Scenario, settings: tuple[str, ...], *, at_round: int) -> Scenario:
    """``scenario`` with each ``key=value`` of ``settings`` applied (see the module docstring)."""
    doc = scenario_to_builtins(scenario)
    doc.pop("path", None)
    for setting in settings:
        key, sep, raw = setting.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {setting!r}: expected key=value, such as llm.model=gpt-4o")
        value = _toml_value(raw)
        _refuse_what_a_fork_cannot_apply(key.strip(), setting, at_round)
        if key.strip() == "inject":
            doc["inject"] = [*doc.get("inject", ()), _injection(value, at_round, setting)]
        else:
            _assign(doc, key.strip().split("."), value, setting)
    try:
        decoded = msgspec.convert(doc, ScenarioDoc, strict=False)
    except msgspec.ValidationError as error:
        raise ConfigError(f"--set: {error}") from None
    fields = {f: getattr(decoded, f) for f in ScenarioDoc.__struct_fields__}
    result = Scenario(**fields, path=scenario.path, base_dir=scenario.base_dir)
    check_scenario(result, "--set")
    return result


# Keys a fork would take and then never use: refused, so a "what if" is not silently the old
# run again. (Everything else applies from round N+1 on, as _FORK_APPLIES says.)
_NEVER_IN_A_FORK = {
    "run.runs_dir": "a fork's run directory goes beside RUN's, or into the folder --into DIR",
    "sweep": "a fork is one run; `sopbus sweep` runs the variants of a [sweep] table",
}
# Keys that shape rounds 1..N, which a fork after round N takes from RUN's recording.
_BEFORE_THE_FORK = {
    "scenario.idea": "the idea is the first message, and the rounds up to {n} answered it",
    "scenario.sop": "the SOP built the team whose rounds up to {n} are taken from the recording",
}
_FORK_APPLIES = (
    "llm.*, roles.N.*, actions.NAME.*, run.budget_usd, run.max_rounds, run.seed, prices.*, "
    "sop.*, sandbox.*, mcp.*, inject=TEXT (and, with --at-round 0, scenario.idea and "
    "scenario.sop)"
)


def _refuse_what_a_fork_cannot_apply(key: str, setting: str, at_round: int) -> None:
    def hit(table: dict[str, str]) -> str | None:
        found = [why for k, why in table.items() if key == k or key.startswith(k + ".")]
        return found[0] if found else None

    why = hit(_NEVER_IN_A_FORK)
    if why is None and at_round > 0:
        why = hit(_BEFORE_THE_FORK)
        if why is not None:
            why = why.format(n=at_round) + "; fork with --at-round 0, or run the scenario anew"
    if why is not None:
        raise ConfigError(
            f"--set {setting!r}: a fork cannot apply {key} ({why}); a fork applies {_FORK_APPLIES}"
        )


def _toml_value(raw: str) -> Any:
    """``raw`` read as a TOML value (``5``, ``true``, ``"x"``, ``[1, 2]``, ``{ a = 1 }``);
    anything that is not one is the string itself, so ``llm.model=gpt-4o`` needs no quotes."""
    try:
        return msgspec.toml.decode(f"v = {raw}".encode())["v"]
    except msgspec.DecodeError:
        return raw


def _assign(doc: dict[str, Any], path: list[str], value: Any, setting: str) -> None:
    target: Any = doc
    free = path[0] in ("prices", "sop")  # tables whose keys the user names (models, options)
    for i, part in enumerate(path):
        last = i == len(path) - 1
        if isinstance(target, list) and not part.isdigit():
            part = _index_by_name(target, part, path[:i], setting)
        if isinstance(target, list):
            if not part.isdigit() or int(part) >= len(target):
                raise ConfigError(
                    f"--set {setting!r}: {'.'.join(path[:i])} has {len(target)} "
                    f"entries; {part!r} is not an index of one"
                )
            part_key: Any = int(part)
        elif isinstance(target, dict):
            if part not in target and target and not free:
                near = closest(part, [str(k) for k in target])
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ConfigError(
                    f"--set {setting!r}: no key {part!r} in "
                    f"{'.'.join(path[:i]) or 'the scenario'}{hint}"
                )
            part_key = part
        else:
            raise ConfigError(f"--set {setting!r}: {'.'.join(path[:i])} is a value, not a table")
        if last:
            target[part_key] = value
            return
        child = target[part_key] if isinstance(target, list) else target.get(part_key)
        if child is None:
            child = {}
        elif isinstance(child, tuple):
            child = list(child)
        target[part_key] = child
        target = child


def _index_by_name(entries: list[Any], name: str, path: list[str], setting: str) -> str:
    """The index (as text) of the entry named ``name`` in a list of tables (``roles``,
    ``populations``): ``populations.Player.count`` is ``populations.0.count``."""
    names = [e.get("name") for e in entries if isinstance(e, dict)]
    for i, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("name") == name:
            return str(i)
    near = closest(name, [str(n) for n in names if n])
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise ConfigError(
        f"--set {setting!r}: {'.'.join(path)} has no entry named {name!r} "
        f"(names: {', '.join(str(n) for n in names) or 'none'}){hint}"
    )


def _injection(value: Any, at_round: int, setting: str) -> dict[str, Any]:
    entry = dict(value) if isinstance(value, dict) else {"content": str(value)}
    entry.setdefault("round", at_round + 1)
    if not isinstance(entry["round"], int) or entry["round"] <= at_round:
        raise ConfigError(
            f"--set {setting!r}: an injected message comes after the fork's round "
            f"{at_round}; give round = {at_round + 1} or later"
        )
    return entry


def _new_run_dir(run_dir: Path, scenario: Scenario, what: str, into: Path | None) -> Path:
    """A new run directory in ``into`` (a runs folder such as ``runs``), or beside the run."""
    if into is not None and (into / EVENTS).exists():
        raise ConfigError(
            f"--into {into}: that is a run's own directory; name the folder the "
            f"new run's directory goes into (such as runs)"
        )
    return (into if into is not None else run_dir.parent) / new_run_id(f"{scenario.name}-{what}")
