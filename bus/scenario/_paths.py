"""Where the files a scenario names may be: inside the scenario's folder, unless the file
says ``allow_outside = true`` under ``[scenario]``.

A scenario names files (``[llm] fixtures`` and ``cassette``, data files in ``[sop]``) that
sopbus reads and may copy into a run's artifacts or quote in a prompt. A path that leaves
the folder (``../../../etc/shadow``, ``/home/me/.ssh/id_rsa``, or a link inside the folder
that points out of it) would carry any readable file of the machine into a run, so it is a
configuration error unless the file opts in explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

OPT_IN = "allow_outside = true"


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (links followed) is ``folder`` or below it."""
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def outside_problem(relative: str, folder: Path) -> tuple[str, str]:
    """What is wrong with a path that leaves ``folder``, and the fix."""
    return (
        f"path {relative!r} leaves the scenario's folder {folder}",
        f"keep the file in that folder or below it, or write `{OPT_IN}` under [scenario] "
        f"to allow files elsewhere",
    )


def place_of(
    value: str, llm: Any, sop_options: dict[str, Any], populations: Sequence[Any] = ()
) -> str:
    """Where a scenario names the path ``value``: ``$.llm.fixtures[0]``, ``$.sop.outline``,
    ``$.populations[0].attributes_file``, or ``$.sop`` when it is not found as a value (a
    SOP that builds paths itself)."""
    for i, fixture in enumerate(llm.fixtures):
        if fixture == value:
            return f"$.llm.fixtures[{i}]"
    if llm.cassette == value:
        return "$.llm.cassette"
    for i, pop in enumerate(populations):
        if pop.attributes_file == value:
            return f"$.populations[{i}].attributes_file"
        if pop.graph is not None and pop.graph.file == value:
            return f"$.populations[{i}].graph.file"
    return next(_places(value, sop_options, "$.sop"), "$.sop")


def _places(value: str, node: Any, at: str) -> Iterator[str]:
    if node == value:
        yield at
    elif isinstance(node, dict):
        for key, inner in node.items():
            yield from _places(value, inner, f"{at}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, inner in enumerate(node):
            yield from _places(value, inner, f"{at}[{i}]")
