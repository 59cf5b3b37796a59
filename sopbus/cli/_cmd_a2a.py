"""``sopbus a2a serve SCENARIO --port P [--max-budget USD] [--max-total USD] [--host H]
[--token-file F] [--runs-dir DIR]``: a scenario's team as an A2A agent.

The server speaks A2A 1.0 through the official ``a2a-sdk`` (``docs/a2a.md``): an Agent Card
from the scenario, and one normal run per task, its idea the message's text, under the
server's money limits. The protocol is in :mod:`._a2a_server`, the runs in
:mod:`._a2a_tasks`, the card in :mod:`._a2a_card`.
"""

from __future__ import annotations

import argparse

from ._flags import (
    HOST,
    MAX_BUDGET,
    MAX_TOTAL,
    MODEL_FLAGS,
    PORT,
    PROVIDER,
    RUNS_DIR,
    SCENARIO,
    TOKEN_FILE,
    add,
)

NAME = "a2a"
HELP = "speak A2A: serve a scenario's team as an agent other agents call (a2a serve)"
SERVE_HELP = (
    "serve SCENARIO as an A2A agent: an Agent Card from the scenario, one run per task, "
    "each under --max-budget, all under --max-total"
)


def configure(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="a2a_command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve", help=SERVE_HELP, description=SERVE_HELP, formatter_class=parser.formatter_class
    )
    add(
        serve,
        SCENARIO,
        PORT,
        HOST,
        MAX_BUDGET.but(
            help="the budget of each task's run (default: 1.00); a task may ask for less with "
            "the message metadata budget_usd, never more"
        ),
        MAX_TOTAL,
        RUNS_DIR.but(
            help="where the tasks' run directories go (default: runs, in the server's working "
            "directory)"
        ),
        TOKEN_FILE,
        PROVIDER.but(help="LLM provider of every run (default: the scenario's [llm].provider)"),
        *MODEL_FLAGS[1:],
    )
    serve.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from ._runref import check_runs_dir

    token = _token(args)
    runs_dir = Path(args.runs_dir).absolute()
    check_runs_dir(runs_dir)
    server = _door()
    settings = server.ServeSettings(
        scenario=Path(args.scenario),
        host=args.host,
        port=args.port,
        max_budget=args.max_budget,
        max_total=args.max_total,
        runs_dir=runs_dir,
        token=token,
        model=_model(args),
    )
    import tempfile

    from sopbus._assemble import run_environ

    from ._a2a_card import agent_card
    from ._a2a_tasks import Desk, load_team, open_account
    from ._version import installed

    _check_money(args)
    scenario, team = load_team(settings.scenario, settings.model, runs_dir)
    card = agent_card(
        scenario, team, settings.url, token=token is not None, version=installed() or "0+unknown"
    )
    # The server's account lives as long as the server: its total is this server's.
    with tempfile.TemporaryDirectory(prefix="sopbus-a2a-") as folder:
        account = open_account(Path(folder) / "budget.json", args.max_total)
        desk = Desk(scenario, max_budget=args.max_budget, account=account, environ=run_environ())
        asyncio.run(server.serve_until_stopped(settings, desk, card))
    return 0


def _check_money(args: argparse.Namespace) -> None:
    from sopbus.bus import ConfigError
    from sopbus.bus.money import money

    if args.max_budget > args.max_total:
        raise ConfigError(
            f"--max-budget {money(args.max_budget)} is more than --max-total "
            f"{money(args.max_total)}: no task could ever be accepted; lower --max-budget or "
            f"raise --max-total"
        )


def _token(args: argparse.Namespace) -> str | None:
    """The bearer token of ``--token-file``; a ConfigError when the server would listen
    beyond loopback without one, or the file is unreadable or empty."""
    from sopbus.bus import ConfigError

    if args.token_file is None:
        if not _loopback(args.host):
            raise ConfigError(
                f"--host {args.host} listens beyond this machine, and anyone who reaches it "
                f"could spend the server's budget: give --token-file FILE (a bearer token "
                f"every request must send), or listen on --host 127.0.0.1"
            )
        return None
    try:
        token = open(args.token_file, encoding="utf-8").read().strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(
            f"--token-file {args.token_file}: cannot read it ({error}); give a file holding "
            f"the token on one line"
        ) from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError(
            f"--token-file {args.token_file}: expected one token of at least 16 characters "
            f"without spaces (such as the output of `openssl rand -hex 32`)"
        )
    return token


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any address


def _model(args: argparse.Namespace) -> dict[str, object]:
    model = {
        "provider": args.provider,
        "model": args.model,
        "base_url": args.base_url,
        "price": args.price,
    }
    return {k: v for k, v in model.items() if v is not None}


def _door():  # type: ignore[no-untyped-def]
    from sopbus.bus import ConfigError

    try:
        from . import _a2a_server
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] not in {"a2a", "starlette", "uvicorn"}:
            raise
        raise ConfigError(
            "sopbus a2a needs the A2A SDK, which is not installed: pip install 'sopbus[a2a]'"
        ) from None
    return _a2a_server
