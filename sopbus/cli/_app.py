"""The frame of ``sopbus``: one parser built from the command modules, one command run,
and the errors a user can fix turned into a message and an exit code.

A :class:`~sopbus.bus.ConfigError` is the user's to fix: it is printed without a traceback and
the process exits 2. Ctrl-C exits 130. Any other exception is a bug in sopbus and keeps
its traceback. A mistyped command or option is argparse's usage error (exit 2), from the
command's own parser, with the closest valid name.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from sopbus.bus import ConfigError

from ._exit import ExitCode
from ._flags import Flag, add

PROG = "sopbus"
_PACKAGE = __name__.rpartition(".")[0]
# The order `sopbus --help` lists them in: the common path first. Commands not named here
# follow in alphabetical order.
_ORDER = ("run", "validate", "roles", "runs", "show", "costs")

_EPILOG = """\
exit codes:
  0  completed (idle, stop condition or round limit)
  1  failed
  2  usage or configuration error
  3  budget exhausted
  4  completed, but the SOP's verdict failed (see "verdict" in summary.json)
  5  sopbus diff: the two runs differ
  130  interrupted (Ctrl-C)
"""


def command_modules() -> list[ModuleType]:
    """The ``_cmd_<name>`` modules of this package, in help order."""
    # A directory listing rather than pkgutil.iter_modules, which imports inspect (~15 ms).
    names = [
        file[len("_cmd_") : -len(".py")]
        for directory in sys.modules[_PACKAGE].__path__
        for file in os.listdir(directory)
        if file.startswith("_cmd_") and file.endswith(".py")
    ]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    return [importlib.import_module(f"{_PACKAGE}._cmd_{name}") for name in names]


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from ._version import installed

        print(f"{PROG} {installed() or '(not installed: pip install -e .)'}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with the closest valid name in an "invalid choice" error
    (``sopbus shwo``: did you mean `show`?)."""

    def _check_value(self, action: argparse.Action, value: object) -> None:
        choices = action.choices
        if choices is None or value in choices or not isinstance(value, str):
            super()._check_value(action, value)
            return
        from sopbus.bus import did_you_mean

        listed = ", ".join(map(repr, choices))
        raise argparse.ArgumentError(
            action,
            f"invalid choice: {value!r}{did_you_mean(value, map(str, choices))} "
            f"(choose from {listed})",
        )


class _Command(_Parser):
    """A command's parser. What it does not know is its error, with its usage and the
    closest option (argparse would leave it to the top-level parser, whose usage says
    nothing of the command's options)."""

    # typeshed overloads parse_known_args on the namespace's type; this one takes the
    # plain form argparse's subparser action calls.
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            from sopbus.bus import closest

            options = [o for a in self._actions for o in a.option_strings]
            near = {
                typed: found[0]
                for extra in extras
                if extra.startswith("-")
                and (found := closest(typed := extra.partition("=")[0], options, n=1))
            }
            hint = ", ".join(
                f"`{o}`" + (f" for {t}" if len(near) > 1 else "") for t, o in near.items()
            )
            self.error(
                f"unrecognized arguments: {' '.join(extras)}"
                + (f"; did you mean {hint}?" if hint else "")
            )
        return parsed, extras


class _Help(argparse.HelpFormatter):
    """argparse's help, wrapped without breaking a word at its hyphen: at 80 columns
    ``comma-separated`` or ``--max-rounds`` would otherwise split across two lines."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
            break_long_words=False,
        )


class _RawDescription(argparse.RawDescriptionHelpFormatter, _Help):
    """The top level's help: its epilog (the exit codes) as written, the rest as :class:`_Help`."""


def build_parser() -> argparse.ArgumentParser:
    """The ``sopbus`` parser, one subcommand per command module. Each subcommand's
    namespace carries its ``run`` function as ``args.handler``."""
    parser = _Parser(
        prog=PROG,
        epilog=_EPILOG,
        formatter_class=_RawDescription,
        description="Run teams of LLM agents that work by a standard operating procedure.",
    )
    add(parser, Flag("--version", action=_Version, help="print the version of sopbus and exit"))
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Command
    )
    for module in command_modules():
        sub = commands.add_parser(
            module.NAME, help=module.HELP, description=module.HELP, formatter_class=_Help
        )
        module.configure(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``sopbus`` with ``argv`` (default: the process's arguments) and return the exit
    code (see :class:`~sopbus.cli.ExitCode`)."""
    from sopbus.bus import arm

    arm(os.environ)  # crash tests' kill points; a no-op without SOPBUS_KILL_AT
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help (0) or a usage error argparse already printed (2)
        return done.code if isinstance(done.code, int) else ExitCode.USAGE
    try:
        return int(args.handler(args))
    except ConfigError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BaseExceptionGroup as group:
        # Ctrl-C during a run arrives wrapped by trio's nurseries; anything else is a bug.
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        print(f"{PROG}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`sopbus show RUN --json | head`): stop without a traceback,
        # and point stdout at /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.FAILED
