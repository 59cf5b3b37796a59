"""The one door to the ``mcp`` SDK for ``sopbus mcp``: an ``MCPServer`` whose tools are
:mod:`._mcp_tools`, served over stdio.

The server runs on trio (anyio's trio backend), the engine's own loop, and a run is
``await``-ed through the API's async entry (:func:`sopbus.run_scenario_async`): it yields
at every LLM call and write, so the server keeps answering other requests meanwhile, and a
request the client cancels cancels its run, which ends ``cancelled`` with its summary
written. (On asyncio the run would need a worker thread, and a cancelled request would
have to wait for the thread's run to end.) The short synchronous tools (validate, the
readers) run in the loop's thread too, not in the SDK's worker threads, so they never
build a team concurrently with a run's in the same process registry.

Stdout is the protocol: the SDK's stdio transport points fd 1 at stderr while it serves,
so a stray print (a role's, a child process's) cannot corrupt it, and the API's quiet
logging sends a run's log lines to stderr only (warnings; every line is in ``run.log``).
"""

# No `from __future__ import annotations`: the SDK reads the tools' signatures for their
# schemas, and run_scenario's budget description is built from the settings at runtime.
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import trio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from sopbus.bus import ConfigError
from sopbus.bus.scenario import simulated

from . import _mcp_tools as tools
from ._mcp_tools import RunFailed, ServerSettings

T = TypeVar("T")

Scenario = Annotated[
    str,
    Field(
        description="A shipped scenario's name (from list_examples, e.g. 'flower_shop') or "
        "the path of a scenario TOML file, relative to the server's working directory, in "
        "a folder the server was started with (--scenario-dir)"
    ),
]
RunRef = Annotated[
    str,
    Field(
        description="A run id (as run_scenario returns it; a unique prefix is enough), a run "
        "directory, or 'last' for the most recent run in the server's runs directory"
    ),
]

INSTRUCTIONS = """\
sopbus runs teams of LLM agents that work by a standard operating procedure, each run under
a budget cap in USD that its spend never passes. Find a scenario with list_examples, check
it with validate_scenario, run it with run_scenario (budget required), then read the run
with run_summary, run_costs and run_messages."""


READING = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
RUNNING = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

# What each tool is for, in the words a model reads; the tools on the model and the budget
# say which (list_examples and the readers do not depend on the settings).
DESCRIPTIONS = {
    "list_examples": "List the scenarios that ship with sopbus: name, what the team does, "
    "and file path. Pass a name to validate_scenario or run_scenario.",
    "validate_scenario": "Check a scenario without running it, as `sopbus validate` does (the "
    "file, the team, the prices of {model}). Returns valid, errors (each naming the file, the "
    "$.path and the fix), warnings, what the scenario declares and its watch graph. An "
    "unknown scenario is a tool error.",
    "run_scenario": "Run a scenario to its end on {model}, under a budget cap in USD "
    "(required, at most {max_budget}: a larger ask is refused and nothing runs). Returns "
    "run_id, status (completed, budget_exhausted, cancelled), end_reason, the SOP's verdict, "
    "ok (completed and verdict passed), spend against the cap and run_dir. A run that fails "
    "is a tool error with the reason and its run id. Runs go to the server's runs directory.",
    "run_summary": "A finished run's summary.json: status, end_reason, verdict, rounds, "
    "messages, llm_calls, tokens, total_usd against budget_usd (decimal strings), provider, "
    "model, duration.",
    "run_costs": "What a run spent, as `sopbus costs RUN --json`: total_usd against "
    "budget_usd, calls and outcomes, grouped by_role, by_action and by_model, and why it "
    "stopped spending (money as decimal strings; simulated is true for the embedded "
    "simulator's runs).",
    "run_messages": "A run's message timeline, as `sopbus show RUN --json`: each message's "
    "id, round, from, to, cause_by (the action), whole content, parents and, when nobody "
    "received it, why. Optionally one round or one sender only.",
}


def build(settings: ServerSettings) -> MCPServer:
    """The server with its six tools, each described for a model to use without docs."""
    from ._version import installed

    # A client shows serverInfo.version (and may log it with a bug report); '' says nothing.
    version = installed() or "0+unknown"
    server = MCPServer("sopbus", instructions=INSTRUCTIONS, version=version, log_level="WARNING")
    words = {"model": _model_words(settings), "max_budget": settings.max_budget}
    for tool in (list_examples, *_scenario_tools(settings), *_run_readers(settings)):
        server.add_tool(
            tool,
            description=DESCRIPTIONS[tool.__name__].format(**words),
            annotations=RUNNING if tool.__name__ == "run_scenario" else READING,
        )
    return server


async def list_examples() -> tools.Examples:
    return tools.list_examples()


def _scenario_tools(settings: ServerSettings) -> tuple[Callable[..., Awaitable[Any]], ...]:
    """validate_scenario and run_scenario, on the server's model and budget limit."""

    async def validate_scenario(scenario: Scenario) -> tools.Validation:
        # In a worker thread: validate starts a scenario's MCP servers on a trio loop of its
        # own (trio.run), which cannot nest in this server's loop.
        return await _awaited(lambda: trio.to_thread.run_sync(tools.validate, scenario, settings))

    async def run_scenario(
        scenario: Scenario,
        budget: Annotated[
            float,
            Field(
                strict=True,  # a JSON number: `true` is no budget (lax pydantic made it $1)
                description=f"The run's budget cap in USD, e.g. 0.05; greater than 0 and at "
                f"most {settings.max_budget} (this server's --max-budget). The run stops "
                f"before any LLM call that could pass it.",
            ),
        ],
        max_rounds: Annotated[
            int | None,
            Field(
                strict=True, description="Round limit (default: the scenario's [run].max_rounds)"
            ),
        ] = None,
        idea: Annotated[
            str | None,
            Field(description="The first message, the task (default: the scenario's idea)"),
        ] = None,
        seed: Annotated[
            int | None, Field(strict=True, description="Seed (default: the scenario's [run].seed)")
        ] = None,
    ) -> tools.RunResult:
        return await _awaited(
            lambda: tools.run(
                scenario, budget, settings, max_rounds=max_rounds, idea=idea, seed=seed
            )
        )

    return validate_scenario, run_scenario


def _run_readers(settings: ServerSettings) -> tuple[Callable[..., Awaitable[Any]], ...]:
    """run_summary, run_costs and run_messages, reading the server's runs directory."""

    async def run_summary(run: RunRef) -> dict[str, Any]:
        return await _answer(lambda: tools.summary(run, settings))

    async def run_costs(run: RunRef) -> dict[str, Any]:
        return await _answer(lambda: tools.costs(run, settings))

    async def run_messages(
        run: RunRef,
        round: Annotated[
            int | None,
            Field(strict=True, description="Only the messages published in this round"),
        ] = None,
        role: Annotated[
            str | None, Field(description="Only the messages sent by this role")
        ] = None,
    ) -> dict[str, Any]:
        return await _answer(lambda: tools.messages(run, settings, round=round, role=role))

    return run_summary, run_costs, run_messages


def serve(settings: ServerSettings) -> None:
    """Serves ``settings``'s tools over stdin and stdout until the client closes them."""
    import anyio

    from ._mcp_wire import serve_stdio

    anyio.run(serve_stdio, build(settings), backend="trio")


async def _answer(call: Callable[[], T]) -> T:
    async def now() -> T:
        return call()

    return await _awaited(now)


async def _awaited(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``'s result; the errors a caller can act on as tool errors with their
    message (any other exception is a bug, and the SDK logs its traceback)."""
    try:
        return await call()
    except (ConfigError, RunFailed) as error:
        raise ToolError(str(error)) from None


def _model_words(settings: ServerSettings) -> str:
    chosen = settings.model
    if simulated(str(chosen.get("provider"))):
        return "the embedded simulator (no model is called; spend is what the calls would cost)"
    model = chosen.get("model") or "the scenario's model"
    return f"{chosen.get('provider')} {model}"
