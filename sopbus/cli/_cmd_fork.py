"""``sopbus fork RUN --at-round N [--set key=value ...] [--into DIR]``: "what if" from round N.

A new run that starts from the state of RUN after round N: the answers of rounds 1..N come
from RUN's recording (no provider call, $0), and from round N+1 on it runs live with the
changed settings: ``--set llm.model=gpt-4o``, ``--set run.budget_usd=5``,
``--set run.max_rounds=12``, ``--set inject='Use SQLite, not files'`` (a message published
at round N+1). See :mod:`sopbus.bus.store._fork`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._args import whole_number
from ._flags import INTO, PROGRESS_FLAGS, RUN_FLAGS, SETTINGS, Flag, add
from ._runref import resolve_run

if TYPE_CHECKING:
    from sopbus.bus import Message, Scenario
    from sopbus.sops import Team

NAME = "fork"
HELP = "start a new run from the state after round N of RUN, with changed settings"


round_number = whole_number(0, "a round number")


AT_ROUND = Flag(
    "--at-round",
    metavar="N",
    type=round_number,
    required=True,
    help="the last round taken from RUN (0: none)",
)


def configure(parser: argparse.ArgumentParser) -> None:
    add(parser, *RUN_FLAGS, AT_ROUND, SETTINGS, INTO, *PROGRESS_FLAGS)


def run(args: argparse.Namespace) -> int:
    from sopbus.bus.store import plan_fork

    scenario, continuation = plan_fork(
        resolve_run(args.run, args.runs_dir),
        at_round=args.at_round,
        settings=tuple(args.settings),
        into=args.into,
    )
    blame_settings(scenario, tuple(args.settings))
    from ._running import run_command

    return run_command(scenario, args, continuation)


def blame_settings(scenario: Scenario, settings: tuple[str, ...]) -> None:
    """Builds the forked team once, so that a ``--set`` the SOP refuses (``sop.max_test_round``,
    a bad option value) is reported as the flag's mistake, not the scenario file's: the
    file is fine, the flag changed it."""
    from sopbus.bus import ConfigError
    from sopbus.sops import build_team

    try:
        team = build_team(scenario)
    except ConfigError as exc:
        text = str(exc).removeprefix(f"{scenario.path}: ")
        for setting in settings:
            key = setting.partition("=")[0].strip()
            # RUN's own file ran, so a bad injection is the flag's (its entry has an index).
            blamed = f"$.{key}`" in text or f"$.{key} " in text or text.endswith(f"$.{key}")
            if blamed or (key == "inject" and "$.inject[" in text):
                raise ConfigError(f"--set {setting!r}: {text}") from None
        raise
    _refuse_undeliverable(team, [s for s in settings if s.partition("=")[0].strip() == "inject"])


def _refuse_undeliverable(team: Team, injected: list[str]) -> None:
    """An injected message that no role would receive is refused: it would be recorded as
    undelivered and the fork would be RUN again, not the "what if" asked for."""
    from sopbus.bus import ConfigError

    # with_settings appends the --set injections after the file's own, in the flags' order.
    messages = [i.message for i in team.injections[len(team.injections) - len(injected) :]]
    for setting, message in zip(injected, messages, strict=True):
        if _receivers(team, message):
            continue
        names = ", ".join(r.name for r in team.roles)
        watched = ", ".join(dict.fromkeys(a for r in team.roles for a in r.watch))
        to = f"to {', '.join(message.send_to)}" if message.send_to else "to the watchers of"
        raise ConfigError(
            f"--set {setting!r}: the injected message ({to} {message.cause_by}) would reach no "
            f'role of this team; name its receivers, such as inject=\'{{ content = "...", '
            f'send_to = ["{team.roles[0].name}"] }}\' (roles: {names}), or give a cause_by a '
            f"role watches ({watched})"
        )


def _receivers(team: Team, message: Message) -> list[str]:
    """The roles ``message`` reaches, by the routing contract (docs/design/routing.md)."""
    named = set(message.send_to)
    return [
        r.name
        for r in team.roles
        if r.name != message.sent_from
        and (
            named & {r.name, *r.aliases}
            if named
            else r.watches(message.cause_by, message.sent_from)
        )
    ]
