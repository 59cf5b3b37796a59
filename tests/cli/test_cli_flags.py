"""Every flag of the command line is defined once: each argument of every command comes
from a :class:`~sopbus.cli._flags.Flag`, a name has one definition (or a declared homonym),
and every command that takes a flag parses it alike (destination, type, choices)."""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

import pytest

from sopbus.cli._app import build_parser
from sopbus.cli._flags import RUNS_DIR, Flag, add, flag_of

CLI = Path(__file__).resolve().parents[2] / "sopbus" / "cli"


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("the parser has no subcommands")


def grammar(action: argparse.Action) -> tuple[object, ...]:
    """What a flag parses to, which every command taking it must share."""
    return (
        type(action),
        tuple(action.option_strings),
        action.dest,
        action.type,
        tuple(action.choices) if action.choices is not None else None,
        action.const,
    )


def problems(parsers: dict[str, argparse.ArgumentParser]) -> list[str]:
    """Every way a flag is defined more than once in ``parsers``, said."""
    found: list[str] = []
    roots: dict[str, list[Flag]] = defaultdict(list)
    shapes: dict[tuple[str, int], set[tuple[object, ...]]] = defaultdict(set)
    for command, parser in parsers.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            flag = flag_of(action)
            names = action.option_strings or [action.dest]
            if flag is None:
                found.append(f"sopbus {command} {names[-1]}: added by add_argument, not a Flag")
                continue
            for name in names:
                if all(r is not flag.root for r in roots[name]):
                    roots[name].append(flag.root)
                shapes[(name, id(flag.root))].add(grammar(action))
    for name, defined in roots.items():
        firsts = [r for r in defined if r.homonym_of is None or r.homonym_of not in defined]
        if len(firsts) > 1:
            found.append(f"{name}: defined {len(firsts)} times (one Flag, and .but() variants)")
    found += [f"{name}: parsed {len(s)} ways" for (name, _), s in shapes.items() if len(s) > 1]
    return found


def test_every_flag_of_the_command_line_is_defined_once() -> None:
    parsers = commands(build_parser())
    assert len(parsers) >= 20
    assert problems(parsers) == []
    # the shared definitions are the ones the commands use
    takers = [n for n, p in parsers.items() for a in p._actions if flag_of(a) is RUNS_DIR]
    assert {"costs", "diff", "runs", "show", "verify"} <= set(takers)


def test_the_check_finds_a_flag_defined_twice() -> None:
    top = argparse.ArgumentParser()
    subs = top.add_subparsers()
    one, two, three = (subs.add_parser(n) for n in ("one", "two", "three"))
    add(one, RUNS_DIR)
    add(two, Flag("--runs-dir", metavar="DIR", help="where runs are"))  # a second definition
    three.add_argument("--json", action="store_true")  # not a Flag at all
    assert problems(commands(top)) == [
        "sopbus three --json: added by add_argument, not a Flag",
        "--runs-dir: defined 2 times (one Flag, and .but() variants)",
    ]


def test_a_declared_homonym_is_not_a_second_definition() -> None:
    seed = Flag("--seed", type=int)
    top = argparse.ArgumentParser()
    subs = top.add_subparsers()
    add(subs.add_parser("run"), seed)
    add(subs.add_parser("sweep"), Flag("--seed", metavar="A..B", homonym_of=seed))
    assert problems(commands(top)) == []


def test_a_variant_keeps_the_flags_grammar() -> None:
    variant = RUNS_DIR.but(help="where the server's runs are", default=None)
    assert variant.root is RUNS_DIR and variant.options["type"] is RUNS_DIR.options["type"]
    assert variant.options["help"] == "where the server's runs are"
    with pytest.raises(TypeError, match=r"a variant may change only .* not dest, type"):
        RUNS_DIR.but(type=str, dest="runs")


def test_no_command_adds_an_argument_itself() -> None:
    # Flag.add is the one caller of add_argument: an argument added any other way escapes
    # the check above (its Flag would be missing) and is a second place to define a flag.
    callers = {
        f"{path.name}:{node.lineno}"
        for path in sorted(CLI.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "add_argument"
    }
    assert len(callers) == 1 and next(iter(callers)).startswith("_flags.py:"), callers
