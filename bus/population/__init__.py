"""Populations: many agents declared once, held as columns (docs/populations.md).

The agents' table (attributes drawn from specs or read from a file, their memory), who
acts in a round, the sums of a round's answers, and, for a population on a follower graph,
its agents' feeds and what a post spread to (:class:`Spread`). The member that takes a population's
turns is :class:`sopbus.roles.Population`.
"""

from ._activation import HISTOGRAM_BINS as HISTOGRAM_BINS
from ._activation import RoundTally as RoundTally
from ._activation import acting as acting
from ._activation import round_half_up as round_half_up
from ._rows import PARQUET_EXTRA as PARQUET_EXTRA
from ._rows import table_from_file as table_from_file
from ._spread import CHOICES as CHOICES
from ._spread import Spread as Spread
from ._spread import repost as repost
from ._spread import root_of as root_of
from ._table import AgentTable as AgentTable
from ._table import Choices as Choices
from ._table import drawn_table as drawn_table
from ._table import estimate_bytes as estimate_bytes

__all__ = [
    "CHOICES",
    "HISTOGRAM_BINS",
    "PARQUET_EXTRA",
    "AgentTable",
    "Choices",
    "RoundTally",
    "Spread",
    "acting",
    "drawn_table",
    "estimate_bytes",
    "repost",
    "root_of",
    "round_half_up",
    "table_from_file",
]
