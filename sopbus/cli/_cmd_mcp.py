"""``sopbus mcp [--max-budget USD] [--provider P] [--model M] [--base-url URL]
[--price IN,OUT] [--runs-dir DIR] [--scenario-dir DIR]...``: sopbus as an MCP server over
stdio.

An IDE agent (or any MCP client) starts it as a subprocess and gets six tools: list the
shipped examples, validate a scenario, run one under a budget cap, and read a run's
summary, costs and messages (``docs/sopbus-mcp.md``). Every run is on the model the server
was started with (default: the embedded simulator) and asks for its own budget, at most
``--max-budget``. The tools read scenarios only under the server's roots and runs only in
``--runs-dir`` (:mod:`._mcp_paths`). The tools are in :mod:`._mcp_tools`, the SDK in
:mod:`._mcp_server`.
"""

from __future__ import annotations

import argparse

from ._flags import MAX_BUDGET, MODEL_FLAGS, PROVIDER, RUNS_DIR, SCENARIO_DIR, add

NAME = "mcp"
HELP = (
    "serve sopbus over stdio as an MCP server: list, validate and run scenarios under a "
    "budget cap, read runs"
)


def configure(parser: argparse.ArgumentParser) -> None:
    # run's model flags, with the server's own default provider and runs directory
    provider = PROVIDER.but(help="LLM provider of every run (default: sim, the embedded simulator)")
    runs_dir = RUNS_DIR.but(
        help="where the server's runs go and are read from (default: runs, in the server's "
        "working directory)"
    )
    add(parser, MAX_BUDGET, provider, *MODEL_FLAGS[1:], runs_dir, SCENARIO_DIR)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sopbus.bus import ConfigError
    from sopbus.bus.scenario import price_spec

    from ._runref import check_runs_dir

    if args.price is not None:
        price_spec(args.price)  # a wrong --price is exit 2 now, not an error at every run
    runs_dir = Path(args.runs_dir).absolute()
    check_runs_dir(runs_dir)
    scenario_dirs = tuple(Path(d).absolute() for d in args.scenario_dirs)
    for folder in scenario_dirs:
        if not folder.is_dir():
            raise ConfigError(
                f"--scenario-dir {folder}: not a folder; give the folder your scenario files are in"
            )
    try:
        from ._mcp_server import serve
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != "mcp":
            raise
        raise ConfigError(
            "sopbus mcp needs the MCP SDK, which is not installed: pip install 'sopbus[mcp]'"
        ) from None
    from sopbus.bus.scenario import DEFAULT_PROVIDER

    from ._mcp_tools import ServerSettings

    model = {
        "provider": args.provider or DEFAULT_PROVIDER,
        "model": args.model,
        "base_url": args.base_url,
        "price": args.price,
    }
    serve(
        ServerSettings(
            max_budget=args.max_budget,
            runs_dir=runs_dir,
            model={k: v for k, v in model.items() if v is not None},
            scenario_dirs=scenario_dirs,
        )
    )
    return 0
