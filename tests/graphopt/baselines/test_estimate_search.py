"""Placement search on the analytic estimate: never worse by its own measure, real gains confirmed
by the simulator, proposers that never propose staying, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.estimate_search import (
    estimate_search,
    uniform_moves,
    weighted_moves,
)
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.sim import simulate
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import Decision
from graphopt.workloads import get_graph


@pytest.fixture(scope="module")
def setting():
    return get_graph("random-layered-200-s3"), get_cluster("v100-nvlink-4")


def test_search_only_improves_and_the_simulator_agrees(setting):
    graph, cluster = setting
    start = np.zeros(graph.num_ops, dtype=np.int64)  # everything on one device: room to spread
    estimate = PlacementEstimate(graph, cluster)
    result = estimate_search(graph, cluster, start, 512, seed=1, estimate=estimate)
    assert result.estimates == 512 and result.moves > 0
    assert result.estimate == pytest.approx(float(estimate(result.placement[None])[0]))
    assert result.start_estimate == pytest.approx(float(estimate(start[None])[0]))
    assert result.estimated_speedup > 1.0
    before = simulate(graph, cluster, Decision(placement=start)).step_time
    after = simulate(graph, cluster, Decision(placement=result.placement)).step_time
    assert after < before
    again = estimate_search(graph, cluster, start, 512, seed=1)
    np.testing.assert_array_equal(again.placement, result.placement)  # deterministic per seed
    none = estimate_search(graph, cluster, start, 0)
    assert none.moves == 0 and none.estimates == 0 and (none.placement == start).all()


def test_nothing_to_move_on_one_device_or_no_ops(setting):
    graph, _ = setting
    one = Cluster.from_dict({"name": "one", "devices": [{"name": "g", "preset": "A100-SXM4-40GB"}]})
    start = np.zeros(graph.num_ops, dtype=np.int64)
    result = estimate_search(graph, one, start, 64)
    assert result.moves == result.estimates == 0 and (result.placement == start).all()
    empty = CompGraph.build("empty", [], [])
    result = estimate_search(empty, get_cluster("v100-nvlink-2"), np.zeros(0, dtype=np.int64), 64)
    assert result.estimates == 0 and result.estimated_speedup == 1.0


def test_uniform_moves_never_stay(setting):
    graph, cluster = setting
    rng = np.random.default_rng(0)
    current = rng.integers(0, cluster.num_devices, graph.num_ops)
    ops, devices = uniform_moves(graph.num_ops, cluster.num_devices)(rng, current, 2000)
    assert (devices != current[ops]).all() and len(np.unique(ops)) > 150
    assert set(devices.tolist()) == set(range(cluster.num_devices))


def test_weighted_moves_follow_the_probabilities():
    n, d, k = 6, 4, 20_000
    current = np.array([0, 1, 2, 3, 0, 1])
    probs = np.zeros((n, d))
    probs[np.arange(n), current] = 1.0  # ops 0-3 want to stay where they are
    probs[4] = [0.2, 0.0, 0.6, 0.2]  # op 4 (on 0): 0.8 away, to 2 (3/4) or 3 (1/4)
    probs[5] = [0.1, 0.5, 0.0, 0.4]  # op 5 (on 1): 0.5 away, to 0 (1/5) or 3 (4/5)
    ops, devices = weighted_moves(probs, uniform_share=0.0)(np.random.default_rng(0), current, k)
    assert (devices != current[ops]).all() and set(ops.tolist()) == {4, 5}
    # the plain reading of the rule: P(op) = mass away / total mass away, P(device | op) ~ probs
    assert (ops == 4).mean() == pytest.approx(0.8 / 1.3, abs=0.015)
    assert (devices[ops == 4] == 2).mean() == pytest.approx(0.75, abs=0.015)
    assert (devices[ops == 5] == 3).mean() == pytest.approx(0.8, abs=0.015)
    mixed_ops, mixed = weighted_moves(probs, 0.5)(np.random.default_rng(0), current, k)
    assert (mixed != current[mixed_ops]).all() and set(mixed_ops.tolist()) == set(range(n))
    stay = probs.copy()
    stay[4:] = 0.0
    stay[4, 0] = stay[5, 1] = 1.0  # nothing wants to move: every move is a uniform one
    ops, devices = weighted_moves(stay, 0.0)(np.random.default_rng(0), current, 1000)
    assert (devices != current[ops]).all() and len(set(ops.tolist())) == n


def test_bad_input(setting):
    graph, cluster = setting
    start = np.zeros(graph.num_ops, dtype=np.int64)
    with pytest.raises(ValueError, match="budget must be >= 0"):
        estimate_search(graph, cluster, start, -1)
    with pytest.raises(ValueError, match="start has shape"):
        estimate_search(graph, cluster, start[:-1], 8)
    with pytest.raises(ValueError, match="at least 2 devices"):
        uniform_moves(graph.num_ops, 1)
    with pytest.raises(ValueError, match="uniform_share"):
        weighted_moves(np.ones((3, 2)), 1.5)
