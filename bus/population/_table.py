"""The agents of one population as columns: an index per agent, no object per agent.

A column of choices holds one small code per agent into its tuple of (interned) values; an
int column an ``array('q')``, a float column an ``array('d')``. The agents' memory is a
column too (``last``: each agent's latest numeric answer, NaN until it answered). So an idle
agent costs a few bytes per attribute, and building a million is a few C-speed loops.
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import ConfigError
from ..scenario import Range, parse_attribute

# Bytes one agent needs besides its attributes: its memory (last answer, 8), its turn count
# (4), and the share of the run's per-agent records held while a round's answers are
# summed (about 24). Used for the estimate made before building.
_AGENT_BYTES = 40
_CODE = "H"  # choice codes: up to 65,535 distinct values (a file with more is read as "I")


class Choices:
    """A column of codes into ``values``."""

    __slots__ = ("codes", "values")

    def __init__(self, values: Sequence[Any], codes: array[int]):
        self.values, self.codes = tuple(values), codes

    def __getitem__(self, i: int) -> Any:
        return self.values[self.codes[i]]

    def __len__(self) -> int:
        return len(self.codes)


Column = Choices | array


class AgentTable:
    """``count`` agents named ``{name}-{i}``, their attribute columns and their memory."""

    __slots__ = ("columns", "count", "last", "name", "turns")

    def __init__(self, name: str, count: int, columns: Mapping[str, Column]):
        self.name, self.count = name, count
        self.columns = dict(columns)
        self.last = array("d", [math.nan]) * count
        self.turns = array("I", [0]) * count

    def agent(self, i: int) -> str:
        return f"{self.name}-{i}"

    def attributes(self, i: int) -> dict[str, Any]:
        """Agent ``i``'s attributes, with ``agent`` its name."""
        out = {key: column[i] for key, column in self.columns.items()}
        out["agent"] = self.agent(i)
        return out

    def index_of(self, address: str) -> int | None:
        """The agent ``address`` names (``Player-17``: 17), or ``None``."""
        prefix, dash, number = address.rpartition("-")
        if not dash or prefix != self.name or not number.isdigit():
            return None
        if number != str(int(number)):  # Player-017 is not Player-17
            return None
        i = int(number)
        return i if i < self.count else None

    def nbytes(self) -> int:
        """The bytes the columns hold (what the memory estimate counts)."""
        held = self.last.itemsize * self.count + self.turns.itemsize * self.count
        for column in self.columns.values():
            codes = column.codes if isinstance(column, Choices) else column
            held += codes.itemsize * len(codes)
        return held


def estimate_bytes(count: int, attributes: Mapping[str, Any]) -> int:
    """The memory ``count`` agents with ``attributes`` (specs) need, before building them."""
    per = _AGENT_BYTES + sum(8 if isinstance(s, str) else 2 for s in attributes.values())
    return count * per


def drawn_table(
    name: str, count: int, attributes: Mapping[str, Any], seed: int, *, where: str
) -> AgentTable:
    """A table whose attributes are drawn from their specs, each column from its own
    seeded generator (so adding an attribute leaves the others' draws as they were)."""
    columns: dict[str, Column] = {}
    for key, spec in attributes.items():
        try:
            parsed = parse_attribute(spec)
        except ValueError as exc:
            raise ConfigError(f"{where}.attributes.{key}: {exc}") from None
        rng = random.Random(f"{seed}:{name}:{key}")
        columns[key] = _drawn(parsed, count, rng)
    return AgentTable(name, count, columns)


def _drawn(spec: Range | tuple[Any, ...], count: int, rng: random.Random) -> Column:
    if isinstance(spec, tuple):
        codes = array(_CODE, rng.choices(range(len(spec)), k=count))
        return Choices([_interned(v) for v in spec], codes)
    if spec.kind == "int":
        low, high = int(spec.low), int(spec.high)
        return array("q", rng.choices(range(low, high + 1), k=count))
    span, start = spec.high - spec.low, spec.low
    rand = rng.random
    return array("d", [round(start + span * rand(), 2) for _ in range(count)])


def _interned(value: Any) -> Any:
    import sys

    return sys.intern(value) if isinstance(value, str) else value
