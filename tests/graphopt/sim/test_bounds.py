"""Lower bounds: exact on hand-made graphs, and never above a simulated step time."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_graph, unit_cluster
from test_engine import random_case

from graphopt.graph import CompGraph
from graphopt.sim import PreparedGraph, lower_bounds
from graphopt.sim.bounds import any_fusion_lower_bounds
from graphopt.typing import Decision


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


def test_any_fusion_bound_is_exact_on_a_fused_pair():
    # a -> b: unfused 3.5 + 4.5 = 8 s, fused 5.5 s, below the no-fusion bound; the any-fusion bound
    # counts bytes a read from outside (3 - its output 1) and b's (4 - its input 1): 5 B + 0.5 s.
    g = make_graph([("a", 2, 3, 1, 0), ("b", 2, 4, 2, 0)], [("a", "b", 1)])
    cluster = unit_cluster(1, mem_bandwidth=1.0, launch=0.5)
    fused = PreparedGraph(g, cluster).evaluate(Decision(fusion=np.array([1, 0]))).step_time
    assert fused == 5.5 < lower_bounds(g, cluster).best
    b = any_fusion_lower_bounds(g, cluster)
    assert (b.critical_path, b.work, b.best) == (5.5, 5.5, 5.5)


def test_any_fusion_bound_with_measured_ops_below_the_launch_overhead():
    # chain a -> b -> c measured at 1, 0, 1 s (10 FLOPs each would take 10 s), launch 0.5 s:
    # unfused 2 s; fused into one kernel max(2 - 2 * 0.5, 1) = 1 s, which the bound must allow:
    # weights 0.5, -0.5, 0.5 (measured - launch), path 1 + 0.5 launch - 0.5 for b's negative weight.
    g = CompGraph.from_arrays(
        name="measured",
        op_names=["a", "b", "c"],
        op_types=["T"] * 3,
        op_classes=["elementwise"] * 3,
        flops=[10.0] * 3,
        bytes_accessed=[0.0] * 3,
        output_bytes=[0.0] * 3,
        param_bytes=[0.0] * 3,
        edge_src=[0, 1],
        edge_dst=[1, 2],
        edge_bytes=[0.0, 0.0],
        measured={"unit": [1.0, 0.0, 1.0]},
    )
    cluster = unit_cluster(1, launch=0.5)
    prepared = PreparedGraph(g, cluster)
    assert prepared.evaluate(Decision()).step_time == 2.0
    assert prepared.evaluate(Decision(fusion=np.array([1, 1, 0]))).step_time == 1.0
    b = any_fusion_lower_bounds(g, cluster)
    assert (b.critical_path, b.work) == (1.0, 1.0)


def test_any_fusion_bound_of_an_empty_graph_is_zero():
    g = make_graph([], [])
    assert any_fusion_lower_bounds(g, unit_cluster(2)).best == 0.0


def _fusions(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Every fusion of a small graph, else none, all, and random ones."""
    if n <= 8:
        return [(mask >> np.arange(n)) & 1 for mask in range(2**n)]
    return [np.zeros(n, np.int64), np.ones(n, np.int64)] + [
        (rng.random(n) < p).astype(np.int64) for p in (0.2, 0.5, 0.8, 0.95) for _ in range(4)
    ]


@pytest.mark.parametrize("seed", range(60))
def test_any_fusion_bound_never_exceeds_a_simulated_step(seed: int):
    """Random graphs (some ops measured, some at 0 s, below the launch overhead), placements and
    priorities, with every fusion of small graphs and many of the larger ones."""
    graph, cluster, decision = random_case(seed)
    prepared = PreparedGraph(graph, cluster)
    bound = any_fusion_lower_bounds(graph, cluster).best
    rng = np.random.default_rng(seed)
    for fusion in _fusions(graph.num_ops, rng):
        m = prepared.evaluate(
            Decision(placement=decision.placement, priority=decision.priority, fusion=fusion)
        )
        if np.isfinite(m.step_time):  # an illegal fusion has no step to bound
            assert bound <= m.step_time * (1 + 1e-12)


def test_costs_beyond_float64_give_an_infinite_bound_without_a_numpy_warning():
    import warnings

    huge = 1.7e308  # two such ops on one device sum beyond float64
    graph = make_graph([("a", huge, 0, 1, 0), ("b", huge, 0, 1, 0)], [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning would fail the test
        bounds = lower_bounds(graph, unit_cluster(1))
    assert bounds.critical_path == huge and bounds.work == np.inf
