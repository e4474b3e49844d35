"""Lower bounds: exact on hand-made graphs, and never above a simulated step time."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_graph, unit_cluster
from test_engine import random_case

from graphopt.sim import PreparedGraph, lower_bounds


def test_chain_and_fork_bounds():
    # chain 1 + 2 + 3 s: critical path 6, work 6 / 2 devices = 3.
    chain = make_graph(
        [("a", 1, 0, 1, 0), ("b", 2, 0, 1, 0), ("c", 3, 0, 1, 0)], [("a", "b", 1), ("b", "c", 1)]
    )
    b = lower_bounds(chain, unit_cluster(2))
    assert (b.critical_path, b.work, b.best) == (6.0, 3.0, 6.0)
    # four independent 1 s ops on 2 devices: path 1, work 2.
    wide = make_graph([(f"o{i}", 1, 0, 1, 0) for i in range(4)], [])
    b = lower_bounds(wide, unit_cluster(2))
    assert (b.critical_path, b.work, b.best) == (1.0, 2.0, 2.0)


def test_bounds_use_the_fastest_device_and_fusion():
    g = make_graph([("a", 2, 3, 1, 0), ("b", 2, 4, 2, 0)], [("a", "b", 1)])
    cluster = unit_cluster(1, mem_bandwidth=1.0, launch=0.5)
    assert lower_bounds(g, cluster).critical_path == 3.5 + 4.5
    # fused: 4 FLOPs, 3 + 4 - 1 - 1 = 5 B -> 5.5 s
    assert lower_bounds(g, cluster, fusion=np.array([1, 0])).critical_path == 5.5


def test_illegal_fusion_has_no_bound():
    g = make_graph(
        [("p", 1, 0, 1, 0), ("u", 1, 0, 1, 0), ("v", 1, 0, 1, 0), ("w", 1, 0, 1, 0)],
        [("p", "u", 1), ("p", "w", 1), ("u", "v", 1), ("v", "w", 1)],
    )
    with pytest.raises(ValueError, match="illegal fusion"):
        lower_bounds(g, unit_cluster(1), fusion=np.array([1, 0, 0, 0]))


@pytest.mark.parametrize("seed", range(60))
def test_bounds_never_exceed_a_simulated_step(seed: int):
    graph, cluster, decision = random_case(seed)
    m = PreparedGraph(graph, cluster).evaluate(decision)
    if np.isinf(m.step_time):
        return  # illegal fusion: nothing to bound
    b = lower_bounds(graph, cluster, fusion=decision.fusion)
    assert b.best <= m.step_time * (1 + 1e-12)
