"""Follower graphs: who follows whom among a team's roles or a population's agents.

A :class:`FollowGraph` holds its edges as two int32 CSR indexes (~8 bytes an edge, where a
graph library takes ~1 KB): ``followers_of(i)`` is whom ``i``'s posts reach,
``followees_of(i)`` whom ``i`` reads. Graphs come from a seeded generator
(:func:`random_graph`, :func:`small_world`, :func:`preferential`, or :func:`generate` by
name) or a file (:func:`read_graph`, CSV or JSON lines); :class:`Feed` gives an agent the
newest posts of whom it follows, O(followees) per read.
"""

from ._csr import FollowGraph as FollowGraph
from ._feed import Feed as Feed
from ._feed import Post as Post
from ._generate import GENERATORS as GENERATORS
from ._generate import PARAMETERS as PARAMETERS
from ._generate import generate as generate
from ._generate import preferential as preferential
from ._generate import random_graph as random_graph
from ._generate import small_world as small_world
from ._read import read_graph as read_graph

__all__ = [
    "GENERATORS",
    "PARAMETERS",
    "Feed",
    "FollowGraph",
    "Post",
    "generate",
    "preferential",
    "random_graph",
    "read_graph",
    "small_world",
]
