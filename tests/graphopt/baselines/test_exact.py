from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from helpers_baselines import random_cluster, small_random_graphs

from graphopt.baselines.exact import solve_exact, unmodelled_options
from graphopt.baselines.search import random_search, simulated_annealing
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.sim import PreparedGraph, lower_bounds, simulate
from graphopt.typing import Decision
from graphopt.workloads import layered_dag, series_parallel_dag


def _cluster(
    num_devices: int, *, memory: float = 1e15, hetero: bool = False, bandwidth: float = 25e9
) -> Cluster:
    """V100-like devices (device 0 a CPU when ``hetero``), equal links (slower to the CPU)."""
    devices = tuple(
        Device(f"cpu{i}", "CPU", 6e12, 2.5e11, memory, 1e-5)
        if hetero and i == 0
        else Device(f"gpu{i}", "V100", 15.7e12, 9e11, memory, 5e-6)
        for i in range(num_devices)
    )
    bw = np.full((num_devices, num_devices), bandwidth)
    if hetero:
        bw[0, :] = bw[:, 0] = bandwidth / 2
    return Cluster("c", devices, bw, np.full((num_devices, num_devices), 5e-6))


def _balanced(n: int, seed: int, p_edge: float = 0.35) -> CompGraph:
    """A random DAG whose ops take 6-60 us and whose transfers take 4-40 us at 25 GB/s, so that
    parallelism, communication and link contention all matter."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for v in range(1, n):
        for u in range(v):
            if rng.random() < p_edge:
                src.append(u)
                dst.append(v)
    flops = rng.uniform(1e8, 1e9, n)
    out = rng.uniform(1e5, 1e6, n).round()
    params = np.where(rng.random(n) < 0.5, rng.uniform(1e5, 1e6, n).round(), 0.0)
    edge_bytes = (out[np.array(src, dtype=np.int64)] * rng.uniform(0.3, 1.0, len(src))).round()
    names = [f"op{i}" for i in range(n)]
    return CompGraph.from_arrays(
        f"balanced-{n}-s{seed}",
        names,
        ["MatMul"] * n,
        flops,
        2 * out,
        out,
        params,
        src,
        dst,
        edge_bytes,
    )


def _brute_force(graph: CompGraph, cluster: Cluster) -> float:
    """Fastest valid step time over every placement and every priority order."""
    prepared = PreparedGraph(graph, cluster)
    n = graph.num_ops
    orders = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
    priorities = np.empty_like(orders)
    np.put_along_axis(priorities, orders, np.arange(n)[None, :], axis=1)
    best = np.inf
    for placement in itertools.product(range(cluster.num_devices), repeat=n):
        placements = np.repeat(np.array([placement], dtype=np.int64), len(orders), axis=0)
        out = prepared.evaluate_batch(placements, priorities)
        best = min(best, float(np.where(out.valid, out.step_time, np.inf).min()))
    return best


def _check_replay(result) -> None:
    """The decision re-simulates to the model's makespan, up to rounding."""
    assert result.decision is not None and result.measurement is not None
    assert abs(result.measurement.step_time - result.makespan) <= result.tolerance
    assert result.tolerance < 1e-4 * result.makespan


CASES = [
    (_balanced(6, 0), _cluster(2)),
    (_balanced(6, 1), _cluster(2, hetero=True, bandwidth=2e9)),
    (layered_dag(6, 1), _cluster(2)),  # relaxed optimum 3% below the best list schedule
    (series_parallel_dag(6, 2), _cluster(2, hetero=True)),
    (_balanced(5, 3), _cluster(3, bandwidth=1e9)),
    (_balanced(5, 4), _cluster(3, hetero=True, bandwidth=1e10)),
]


@pytest.mark.parametrize(("graph", "cluster"), CASES, ids=lambda x: getattr(x, "name", None))
def test_list_model_is_the_optimum_over_all_decisions(graph, cluster):
    best = _brute_force(graph, cluster)
    result = solve_exact(graph, cluster, time_limit=30)
    assert result.optimal and result.memory == "cannot bind"
    assert abs(result.makespan - best) <= result.tolerance
    assert result.bound <= result.makespan
    _check_replay(result)
    relaxed = solve_exact(graph, cluster, model="relaxed", time_limit=30)
    assert relaxed.optimal and relaxed.makespan <= best + relaxed.tolerance
    assert relaxed.measurement is not None
    assert relaxed.measurement.step_time >= best - relaxed.tolerance


def test_relaxed_model_can_be_unreachable_by_priorities():
    """The classic model waits on purpose; no priority list can: its optimum is only a bound."""
    graph, cluster = layered_dag(6, 1), _cluster(2)
    exact = solve_exact(graph, cluster)
    relaxed = solve_exact(graph, cluster, model="relaxed")
    assert relaxed.makespan < 0.98 * exact.makespan
    assert relaxed.measurement is not None
    assert relaxed.measurement.step_time > exact.makespan


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_memory_is_modelled_exactly(seed):
    graph = _balanced(6, seed)
    total = graph.param_bytes.sum() + graph.output_bytes.sum()
    for frac in (0.55, 0.7):
        cluster = _cluster(2, memory=frac * total)
        best = _brute_force(graph, cluster)
        result = solve_exact(graph, cluster, time_limit=30)
        assert result.memory == "modelled"
        if np.isinf(best):
            assert result.status == "infeasible" and result.decision is None
            assert result.makespan == np.inf
            continue
        assert result.optimal and abs(result.makespan - best) <= result.tolerance
        _check_replay(result)
        assert result.measurement is not None and result.measurement.valid


def _random_small_cases(count: int, high: int) -> list[tuple[CompGraph, Cluster]]:
    rng = np.random.default_rng(7)
    cases = []
    for k in range(count):
        n = int(rng.integers(6, high + 1))
        graph = (_balanced, layered_dag, series_parallel_dag)[k % 3](n, 100 + k)
        cluster = _cluster(2 + k % 2, hetero=k % 4 >= 2, bandwidth=float(rng.choice([5e9, 25e9])))
        cases.append((graph, cluster))
    return cases


def _heuristics(graph: CompGraph, cluster: Cluster) -> dict[str, float]:
    """Step times of every placer (topological order, no fusion), every registered scheduler on
    the best placement, and random search and annealing without fusion."""
    from graphopt.baselines.placement import PLACERS

    times = {}
    for name, placer in PLACERS.items():
        try:
            decision = Decision(placement=placer(graph, cluster))
        except (ValueError, ImportError):
            continue
        times[name] = simulate(graph, cluster, decision).step_time
    for task in ("placement", "scheduling", "joint"):
        for search in (random_search, simulated_annealing):
            result = search(graph, cluster, task, 150, seed=0, search_fusion=False)
            assert result.decision.fusion is not None and not result.decision.fusion.any()
            times[f"{search.__name__}/{task}"] = result.measurement.step_time
    return times


@pytest.mark.parametrize(
    ("graph", "cluster"),
    [  # every third case kept in each run (all three graph shapes, both clusters of each size)
        case if k % 3 == 0 or k < 6 else pytest.param(*case, marks=pytest.mark.expensive)
        for k, case in enumerate(_random_small_cases(24, 12))
    ],
    ids=lambda x: getattr(x, "name", None),
)
def test_optimum_bounds_every_baseline(graph, cluster):
    result = solve_exact(graph, cluster, time_limit=60)
    assert result.optimal
    _check_replay(result)
    assert lower_bounds(graph, cluster).best <= result.makespan + result.tolerance
    for name, step in _heuristics(graph, cluster).items():
        assert result.makespan <= step + result.tolerance, name
    relaxed = solve_exact(graph, cluster, model="relaxed", time_limit=60)
    assert relaxed.optimal and relaxed.makespan <= result.makespan + result.tolerance


@pytest.mark.expensive
@pytest.mark.parametrize(
    ("graph", "cluster"), _random_small_cases(30, 16), ids=lambda x: getattr(x, "name", None)
)
def test_optimum_bounds_every_baseline_up_to_16_ops(graph, cluster):
    test_optimum_bounds_every_baseline(graph, cluster)


@pytest.mark.parametrize("tight", [False, True])
def test_every_simulator_run_is_a_solution_of_the_list_model(tight):
    """Completeness of the list model, decision by decision: a random placement and priority
    order, replayed in integer time, is a solution (CP-SAT with every hinted variable fixed) with
    the simulator's step time; under tight memory, exactly when the simulator finds it valid."""
    from ortools.sat.python import cp_model

    from graphopt.baselines.exact import _Builder

    rng = np.random.default_rng(3)
    outcomes = set()
    for k in range(16):
        n, num_dev = int(rng.integers(5, 16)), int(rng.integers(2, 5))
        graph = (_balanced, layered_dag, series_parallel_dag)[k % 3](n, 200 + k)
        cluster = _cluster(num_dev, hetero=k % 2 == 1, bandwidth=float(rng.choice([1e9, 25e9])))
        placement, priority = rng.integers(0, num_dev, n), rng.permutation(n)
        decision = Decision(placement=placement, priority=priority)
        if tight:
            peak = simulate(graph, cluster, decision).peak_memory.max()
            cluster = _cluster(num_dev, memory=peak * rng.uniform(0.9, 1.1), hetero=k % 2 == 1)
        builder = _Builder(cp_model, PreparedGraph(graph, cluster), "list", True, None)
        _, end, _ = builder.replay(placement, priority)
        measured = simulate(graph, cluster, decision)
        assert abs(max(end) * builder.unit - measured.step_time) <= builder.unit * builder.num_jobs
        builder.hint(placement, priority)
        solver = cp_model.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.num_workers = 1
        feasible = solver.solve(builder.m) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        assert feasible == measured.valid
        outcomes.add(feasible)
    assert outcomes == ({True, False} if tight else {True})


def test_interchangeable_devices():
    from graphopt.baselines.exact import _interchangeable
    from graphopt.hardware import get_cluster

    assert _interchangeable(get_cluster("hetero-cpu-2gpu")) == [[1, 2]]
    assert _interchangeable(get_cluster("v100-pcie-4")) == [[0, 1, 2, 3]]
    assert _interchangeable(get_cluster("v100-nvlink-4")) == []  # links of two speeds
    assert _interchangeable(_cluster(3, hetero=True)) == [[1, 2]]


def test_deterministic():
    graph, cluster = _balanced(9, 5), _cluster(3)
    a, b = solve_exact(graph, cluster), solve_exact(graph, cluster)
    assert a.decision is not None and b.decision is not None
    assert np.array_equal(a.decision.placement, b.decision.placement)
    assert np.array_equal(a.decision.priority, b.decision.priority)
    assert a.makespan == b.makespan


def test_time_limit_reports_feasible_not_optimal():
    graph, cluster = _balanced(30, 0, p_edge=0.1), _cluster(4)
    result = solve_exact(graph, cluster, time_limit=0.05)
    assert result.status in ("feasible", "unknown")
    assert not result.optimal and result.bound < result.makespan
    if result.status == "feasible":
        _check_replay(result)


def test_memory_modes_and_edge_cases():
    graph = _balanced(6, 2)
    assert solve_exact(graph, _cluster(2), memory=False).memory == "ignored"
    hopeless = solve_exact(graph, _cluster(2, memory=1e3))
    assert hopeless.memory == "modelled" and hopeless.status == "infeasible"
    assert hopeless.decision is None and hopeless.measurement is None
    # One device: the optimum is the serial sum of the op times.
    one = solve_exact(graph, _cluster(1))
    serial = PreparedGraph(graph, _cluster(1)).op_time[:, 0].sum()
    assert one.optimal and abs(one.makespan - serial) <= one.tolerance


def test_bad_arguments():
    graph = _balanced(5, 0)
    with pytest.raises(ValueError, match="unknown model"):
        solve_exact(graph, _cluster(2), model="ilp")
    with pytest.raises(ValueError, match="max_ops"):
        solve_exact(layered_dag(70, 0), _cluster(2))
    with pytest.raises(ValueError, match="time_limit"):
        solve_exact(graph, _cluster(2), time_limit=0)


@pytest.mark.expensive
@pytest.mark.parametrize("num_ops", [20, 40])
def test_larger_graphs_replay_within_tolerance(num_ops):
    graph, cluster = _balanced(num_ops, 1, p_edge=3.0 / num_ops), _cluster(2)
    result = solve_exact(graph, cluster, time_limit=60)
    assert result.status in ("optimal", "feasible")
    _check_replay(result)
    assert result.bound <= result.makespan + result.tolerance


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"contention": "none"}, "contention: none"),
        ({"route": "via-host", "host": "d0"}, "route: via-host"),
        ({"send": "per-consumer"}, "send: per-consumer"),
        ({"dispatch": "fcfs"}, "dispatch: fcfs"),
        ({"copies": "free"}, "copies: free"),
    ],
)
def test_exact_refuses_a_model_option_it_does_not_follow(options, named):
    graph = small_random_graphs(1, low=6, high=8)[0]
    cluster = dataclasses.replace(random_cluster(2, seed=0), **options)
    with pytest.raises(ValueError, match=f"solve_exact .* sets {named};"):
        solve_exact(graph, cluster, time_limit=1.0)
    if named == "copies: free":  # without the memory model, free copies change nothing
        assert unmodelled_options(cluster, memory=False) == []
