from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.search import SearchResult, random_search, simulated_annealing
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device, get_cluster
from graphopt.sim import PreparedGraph, simulate
from graphopt.tasks import ONE_SHOT_TASKS as TASKS
from graphopt.typing import Decision
from graphopt.workloads import get_graph, layered_dag, series_parallel_dag

SEARCHES = (random_search, simulated_annealing)


def _cluster(num_devices: int, memory: float = 1e15) -> Cluster:
    devices = tuple(
        Device(f"g{i}", "V100", 15.7e12, 9e11, memory, 5e-6) for i in range(num_devices)
    )
    bw = np.full((num_devices, num_devices), 25e9)
    lat = np.full((num_devices, num_devices), 5e-6)
    return Cluster("c", devices, bw, lat)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows simulated through ``evaluate_batch`` (the searches' only way to evaluate)."""
    rows: list[int] = []
    original = PreparedGraph.evaluate_batch

    def counting(self, placements=None, priorities=None, fusions=None):
        given = next(a for a in (placements, priorities, fusions) if a is not None)
        rows.append(len(np.asarray(given)))
        return original(self, placements, priorities, fusions)

    monkeypatch.setattr(PreparedGraph, "evaluate_batch", counting)
    return rows


def _same(a: SearchResult, b: SearchResult) -> bool:
    return (
        all(
            np.array_equal(getattr(a.decision, k), getattr(b.decision, k))
            for k in ("placement", "priority", "fusion")
        )
        and np.array_equal(a.history, b.history)
        and a.measurement.step_time == b.measurement.step_time
    )


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("task", TASKS)
def test_exact_budget_determinism_and_history(search, task, counted):
    graph, cluster = layered_dag(30, seed=3), get_cluster("v100-nvlink-4")
    for budget in (1, 7, 300):
        counted.clear()
        result = search(graph, cluster, task, budget, seed=5)
        assert result.evaluations == budget == sum(counted) == len(result.history)
        assert np.all(np.diff(result.history) <= 0)  # best so far never gets worse
        assert result.measurement.valid
        assert result.measurement.step_time == pytest.approx(result.history[-1])
        assert _same(result, search(graph, cluster, task, budget, seed=5))
        for key in ("placement", "priority", "fusion"):
            assert getattr(result.decision, key).shape == (graph.num_ops,)
    other = search(graph, cluster, task, 300, seed=6)
    assert other.evaluations == 300


@pytest.mark.parametrize("task", TASKS)
def test_annealing_never_worse_than_its_start(task):
    cluster = get_cluster("v100-nvlink-4")
    for k in range(4):
        graph = (layered_dag if k % 2 else series_parallel_dag)(25, seed=k)
        result = simulated_annealing(graph, cluster, task, 150, seed=k)
        assert result.start is not None
        start = simulate(graph, cluster, result.start)
        assert start.valid and result.measurement.step_time <= start.step_time
        rng = np.random.default_rng(k)
        given = Decision(placement=rng.integers(0, 4, graph.num_ops))
        result = simulated_annealing(graph, cluster, task, 100, seed=k, start=given)
        assert result.start is given
        assert result.measurement.step_time <= simulate(graph, cluster, given).step_time
        rs = random_search(graph, cluster, task, 50, seed=k, start=given)
        assert rs.measurement.step_time <= simulate(graph, cluster, given).step_time


def test_default_start_is_the_best_heuristic():
    from graphopt.baselines.placement import PLACERS

    graph, cluster = layered_dag(40, seed=1), get_cluster("v100-nvlink-4")
    result = simulated_annealing(graph, cluster, "placement", 1 + len(PLACERS), seed=0)
    best = min(
        simulate(graph, cluster, Decision(placement=p(graph, cluster))).step_time
        for p in PLACERS.values()
    )
    assert result.start is not None
    assert simulate(graph, cluster, result.start).step_time == best
    assert result.measurement.step_time <= best


def test_search_finds_better_placements_than_the_heuristics_on_a_workload():
    graph, cluster = get_graph("wavenet-tiny"), get_cluster("v100-nvlink-4")
    sa = simulated_annealing(graph, cluster, "placement", 400, seed=0)
    assert sa.start is not None
    assert sa.measurement.step_time < simulate(graph, cluster, sa.start).step_time


def test_joint_without_fusion_keeps_the_start_fusion():
    graph, cluster = series_parallel_dag(20, seed=2), get_cluster("v100-nvlink-2")
    for search in SEARCHES:
        result = search(graph, cluster, "joint", 120, seed=0, search_fusion=False)
        assert result.decision.fusion is not None and not result.decision.fusion.any()
        fused = search(graph, cluster, "joint", 120, seed=0)
        assert fused.decision.fusion is not None


def test_invalid_decisions_are_penalised_and_reported():
    graph = layered_dag(20, seed=4)
    # Fits on no device: every decision is out of memory; the result says why.
    hopeless = _cluster(2, memory=1e3)
    for search in SEARCHES:
        result = search(graph, hopeless, "placement", 40, seed=0)
        assert not result.measurement.valid
        assert "out of memory" in result.measurement.reason
        assert np.all(np.isinf(result.history))
    # Tight memory: one device is out of memory, two fit; annealing walks out of the OOM start.
    start = Decision(placement=np.zeros(graph.num_ops, dtype=np.int64))
    tight = _cluster(2, memory=0.75 * simulate(graph, _cluster(2), start).peak_memory[0])
    assert not simulate(graph, tight, start).valid
    result = simulated_annealing(graph, tight, "placement", 300, seed=0, start=start)
    assert result.measurement.valid
    # Random fusion is often illegal; an illegal decision is never returned.
    result = random_search(graph, _cluster(2), "fusion", 200, seed=0)
    assert result.measurement.valid


def test_bad_arguments():
    graph, cluster = layered_dag(5, seed=0), _cluster(2)
    for search in SEARCHES:
        with pytest.raises(ValueError, match="unknown task"):
            search(graph, cluster, "layout", 10, seed=0)
        with pytest.raises(ValueError, match="budget"):
            search(graph, cluster, "placement", 0, seed=0)
    with pytest.raises(ValueError, match="temperatures"):
        simulated_annealing(graph, cluster, "placement", 10, seed=0, t_start=0.0)
    empty = CompGraph.build("empty", [], [])
    with pytest.raises(ValueError, match="no ops"):
        random_search(empty, cluster, "placement", 10, seed=0)
