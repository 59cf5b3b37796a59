"""A follower graph held compactly: two CSR (compressed sparse row) indexes of int32 nodes.

``followees`` lists, node after node, whom each node follows; ``followers`` the same edges
turned round. Each index is an offsets array (int64, ``n + 1`` entries) and a targets array
(int32, one entry per edge), so a graph costs about 8 bytes per edge plus 16 per node, where
a graph library's dict-of-dicts costs about a kilobyte per edge. A node's neighbours are a
``memoryview`` slice: no copy, O(1) to take.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from .._errors import ConfigError


class FollowGraph:
    """Who follows whom among ``n`` nodes (``0 .. n-1``); an edge ``a -> b`` says ``a``
    follows ``b``, so ``b``'s posts reach ``a``.

    Build one with a generator (:func:`random_graph`, :func:`small_world`,
    :func:`preferential`), from a file (:func:`read_graph`) or from edge lists
    (:meth:`from_edges`). It does not change once built.
    """

    __slots__ = ("_in_off", "_in_to", "_out_off", "_out_to", "n")

    def __init__(self, n: int, out_off: array[int], out_to: array[int]):
        """``out_off``/``out_to``: the followees index (CSR, ``out_to`` int32). The followers
        index is derived from it."""
        self.n = n
        self._out_off, self._out_to = out_off, out_to
        self._in_off, self._in_to = _transposed(n, out_off, out_to)

    @classmethod
    def from_edges(cls, n: int, edges: Iterable[tuple[int, int]]) -> FollowGraph:
        """The graph of ``(follower, followee)`` pairs; self-follows and repeated edges are
        dropped (a repeat would deliver a post twice)."""
        follows: list[set[int]] = [set() for _ in range(n)]
        for a, b in edges:
            if not (0 <= a < n and 0 <= b < n):
                raise ConfigError(f"edge ({a}, {b}) names a node outside 0..{n - 1}")
            if a != b:
                follows[a].add(b)
        off, to = array("q", [0]), array("i")
        for targets in follows:
            to.extend(sorted(targets))
            off.append(len(to))
        return cls(n, off, to)

    @property
    def edges(self) -> int:
        return len(self._out_to)

    def followees_of(self, node: int) -> memoryview:
        """Whom ``node`` follows (int32 node indexes, ascending for files and edge lists,
        in generation order for generators)."""
        return memoryview(self._out_to)[self._out_off[node] : self._out_off[node + 1]]

    def followers_of(self, node: int) -> memoryview:
        """Who follows ``node``, ascending: whom its posts reach."""
        return memoryview(self._in_to)[self._in_off[node] : self._in_off[node + 1]]

    def out_degree(self, node: int) -> int:
        return self._out_off[node + 1] - self._out_off[node]

    def in_degree(self, node: int) -> int:
        return self._in_off[node + 1] - self._in_off[node]

    def edge_list(self) -> list[tuple[int, int]]:
        """Every ``(follower, followee)`` pair (for tests and small graphs)."""
        return [(a, b) for a in range(self.n) for b in self.followees_of(a)]

    @property
    def nbytes(self) -> int:
        """The bytes the four arrays hold."""
        arrays = (self._out_off, self._out_to, self._in_off, self._in_to)
        return sum(a.itemsize * len(a) for a in arrays)

    def __repr__(self) -> str:
        return f"<FollowGraph {self.n} nodes, {self.edges} edges>"


def fixed_degree(n: int, degree: int, out_to: array[int]) -> FollowGraph:
    """The graph in which node ``i`` follows ``out_to[i*degree : (i+1)*degree]``."""
    offsets = array("q", range(0, n * degree + 1, degree)) if degree else array("q", [0] * (n + 1))
    return FollowGraph(n, offsets, out_to)


def _transposed(n: int, off: array[int], to: array[int]) -> tuple[array[int], array[int]]:
    """The followers index of a followees index: a counting sort by followee, so each
    node's followers come out ascending. Two passes over the edges, no per-edge object."""
    counts = [0] * (n + 1)
    for b in to:
        counts[b + 1] += 1
    for i in range(n):
        counts[i + 1] += counts[i]
    in_off = array("q", counts)
    place = counts  # reused as the next free slot of each node
    in_to = array("i", bytes(4 * len(to)))
    for a in range(n):
        for b in to[off[a] : off[a + 1]]:
            in_to[place[b]] = a
            place[b] += 1
    return in_off, in_to
