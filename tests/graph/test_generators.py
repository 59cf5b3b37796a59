"""The follower-graph generators: reproducible, well-formed, and shaped like networkx's
reference generators (degree distributions, clustering), at a fraction of the memory."""

from __future__ import annotations

import statistics
from typing import Any

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sopbus.bus import ConfigError
from sopbus.bus.graph import FollowGraph, generate, preferential, random_graph, small_world


def undirected(g: FollowGraph) -> nx.Graph:
    h = nx.Graph()
    h.add_nodes_from(range(g.n))
    h.add_edges_from(g.edge_list())
    return h


def assert_well_formed(g: FollowGraph) -> None:
    edges = g.edge_list()
    assert len(edges) == len(set(edges)) == g.edges, "a repeated edge"
    assert all(a != b for a, b in edges), "a self-follow"
    for b in range(g.n):  # the followers index is exactly the followees index turned round
        assert list(g.followers_of(b)) == sorted(a for a, x in edges if x == b)
        assert g.in_degree(b) == len(g.followers_of(b))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    seed=st.integers(0, 2**32),
    kind=st.sampled_from(["random", "small_world", "preferential"]),
    data=st.data(),
)
def test_every_generator_is_well_formed_and_reproducible(
    n: int, seed: int, kind: str, data: st.DataObject
) -> None:
    if kind == "random":
        params: dict[str, Any] = {"degree": data.draw(st.integers(0, n - 1))}
    elif kind == "small_world":
        params = {"k": 2 * data.draw(st.integers(0, (n - 1) // 2)), "p": data.draw(st.floats(0, 1))}
    else:
        params = {"m": data.draw(st.integers(0, n - 1))}
    g = generate(kind, n, seed=seed, **params)
    assert_well_formed(g)
    assert g.edge_list() == generate(kind, n, seed=seed, **params).edge_list()


def test_random_out_degree_is_fixed_and_in_degree_poisson_like() -> None:
    g = random_graph(5000, 8, seed=3)
    assert {g.out_degree(i) for i in range(g.n)} == {8}
    ins = [g.in_degree(i) for i in range(g.n)]
    ref = nx.gnm_random_graph(5000, 5000 * 8, seed=3, directed=True)
    ref_ins = [d for _, d in ref.in_degree()]
    assert statistics.mean(ins) == 8
    assert abs(statistics.pvariance(ins) - statistics.pvariance(ref_ins)) < 1.0  # both ~8
    assert random_graph(5000, 8, seed=4).edge_list() != g.edge_list()


def test_small_world_without_rewiring_is_networkx_ring_lattice() -> None:
    g = small_world(60, 6, 0.0)
    assert nx.utils.graphs_equal(undirected(g), nx.watts_strogatz_graph(60, 6, 0.0))
    assert all(set(g.followees_of(i)) == set(g.followers_of(i)) for i in range(60))


def test_small_world_clustering_falls_with_rewiring_as_networkx_does() -> None:
    ours, ref = [], []
    for p in (0.0, 0.1, 1.0):
        ours.append(nx.average_clustering(undirected(small_world(1000, 10, p, seed=7))))
        ref.append(nx.average_clustering(nx.watts_strogatz_graph(1000, 10, p, seed=7)))
    assert ours[0] == pytest.approx(ref[0])  # the lattice: 2/3 * (k-2)/(k-1)
    assert ours[0] > ours[1] > ours[2]
    # Rewired edges do not pair up in the directed graph, so ours clusters somewhat less.
    assert ref[1] * 0.6 < ours[1] <= ref[1] * 1.1
    assert ours[2] < 0.05 and ref[2] < 0.05


def test_preferential_gives_a_heavy_tail_like_barabasi_albert() -> None:
    g = preferential(5000, 3, seed=1)
    assert g.edges == (5000 - 3) * 3
    assert {g.out_degree(i) for i in range(3, 5000)} == {3}
    ours = sorted((g.in_degree(i) + g.out_degree(i) for i in range(g.n)), reverse=True)
    ref = sorted((d for _, d in nx.barabasi_albert_graph(5000, 3, seed=1).degree()), reverse=True)
    assert statistics.mean(ours) == pytest.approx(statistics.mean(ref), rel=0.01)
    # A hub far above the mean, as in the reference, unlike a uniform random graph.
    assert ours[0] > 10 * statistics.mean(ours) and ref[0] > 10 * statistics.mean(ref)
    assert 0.3 < ours[0] / ref[0] < 3
    uniform = random_graph(5000, 3, seed=1)
    assert max(uniform.in_degree(i) for i in range(5000)) < ours[0] / 5
    # Old nodes gather followers: the first hundred hold far more than a fair share.
    assert sum(g.in_degree(i) for i in range(100)) > 5 * 100 * 3


def test_compact_under_ten_bytes_an_edge() -> None:
    g = random_graph(20000, 10, seed=0)
    assert g.nbytes / g.edges < 10
    assert type(g.followers_of(0)) is memoryview and g.followers_of(0).itemsize == 4


@pytest.mark.parametrize(
    ("kind", "params", "said"),
    [
        ("random", {"degree": 10}, "degree must be a whole number from 0 to 4"),
        ("small_world", {"k": 3, "p": 0.1}, "even k"),
        ("small_world", {"k": 2, "p": 1.5}, "p in [0, 1]"),
        ("preferential", {"m": 2, "k": 1}, "unknown k"),
        ("preferential", {}, "missing m"),
        ("smallworld", {}, "did you mean `small_world`"),
    ],
)
def test_bad_parameters_say_what_is_wrong(kind: str, params: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        generate(kind, 5, **params)
    assert said in str(err.value)
