"""The comparison table behind `graphopt baselines` and `graphopt eval`."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphopt.baselines.staged import best_heuristic
from graphopt.eval.compare import compare_on_graph, geomean_speedups, heuristics
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator, lower_bounds, simulate
from graphopt.typing import Decision
from graphopt.workloads import get_graph


@pytest.mark.parametrize("task", ["placement", "scheduling", "fusion", "joint"])
def test_heuristic_results_match_the_simulator(task):
    graph, cluster = get_graph("txl-tiny"), get_cluster("v100-nvlink-2")
    results, best, row = heuristics(graph, cluster, task, Simulator())
    assert results and all(r.kind == "heuristic" for r in results)
    best_time = simulate(graph, cluster, best).step_time
    assert best_time == min(r.step_time for r in results if r.valid) == row.step_time
    decision, measurement, label = best_heuristic(graph, cluster, task, Simulator())
    assert (
        measurement.step_time == best_time
        and simulate(graph, cluster, decision).step_time == best_time
    )
    stages = {"placement": 1, "scheduling": 2, "fusion": 3, "joint": 3}[task]
    assert len(label.split("+")) == stages and "best" not in label
    if task == "placement":
        single = next(r for r in results if r.method == "single")
        assert single.step_time == simulate(graph, cluster, Decision()).step_time


def test_compare_with_search_optimum_and_policy():
    graph = get_graph("random-sp-30-s1")  # 30 ops: small enough for the exact optimum
    cluster = get_cluster("v100-nvlink-2")
    calls = []

    def policy():
        calls.append(1)
        return "policy (greedy)", Decision(placement=np.arange(graph.num_ops) % 2), 1

    c = compare_on_graph(graph, cluster, "placement", budget=20, exact_time_limit=20, policy=policy)
    methods = [r.method for r in c.results]
    assert "random-search@20" in methods and "annealing@20" in methods and calls == [1]
    assert c.optimum_status in ("optimal", "feasible")
    exact = next(r for r in c.results if r.kind == "exact")
    assert exact.method == ("optimum" if c.optimum is not None else f"cp-sat ({c.optimum_status})")
    assert methods[-1] == "policy (greedy)"
    best = c.best_heuristic
    assert best is not None and c.speedup_over_best_heuristic(best.method) == 1.0
    # every method is at least the lower bound, and the optimum (if proven) beats every method
    assert all(r.step_time >= c.lower_bound * (1 - 1e-9) for r in c.results if r.valid)
    if c.optimum is not None:
        assert all(r.step_time >= c.optimum * (1 - 1e-6) for r in c.results if r.valid)
    means = geomean_speedups([c, c])
    assert means[best.method] == pytest.approx(1.0)
    assert not math.isnan(means["policy (greedy)"])


@pytest.mark.parametrize("task", ["fusion", "joint"])
def test_fusion_tasks_have_no_reference_that_fusion_beats(task):
    """The review's case: greedy fusion and search reach 1.483 ms, under the optimum and the lower
    bound without fusion (1.508 ms); the table showed a gap of -1.7% to them."""
    graph, cluster = get_graph("random-layered-20-s0"), get_cluster("v100-nvlink-4")
    c = compare_on_graph(graph, cluster, task, budget=100)
    valid = [r for r in c.results if r.valid]
    assert min(r.step_time for r in valid) < lower_bounds(graph, cluster).best  # fusion beats it
    # the gaps of the table are to the optimum if any, else to the lower bound: never negative
    reference = c.optimum if c.optimum is not None else c.lower_bound
    assert c.optimum is None and c.optimum_status == "" and reference > 0
    assert all(r.step_time >= reference for r in valid)
    assert not any(r.method == "optimum" for r in c.results)
    exact = [r.method for r in c.results if r.kind == "exact"]
    assert exact == (["optimum (no fusion)"] if task == "joint" else [])
    d = c.to_dict()
    assert d["optimum"] is None and d["lower_bound"] == c.lower_bound


def testestimate_search_row_row_is_never_slower_than_its_start():
    graph, cluster = get_graph("random-layered-200-s3"), get_cluster("v100-nvlink-4")
    c = compare_on_graph(graph, cluster, "placement", estimate_budget=512)
    row = next(r for r in c.results if r.method == "estimate-search@512")
    best = c.best_heuristic
    assert best is not None and row.kind == "search" and row.evaluations == 1
    assert row.valid and row.step_time <= best.step_time
    for task in ("scheduling", "fusion"):  # placement only
        c = compare_on_graph(graph, cluster, task, estimate_budget=64)
        assert not any(r.method.startswith("estimate-search") for r in c.results)


def testestimate_search_row_prefers_a_valid_result_to_an_invalid_start():
    from graphopt.eval.compare import MethodResult, estimate_search_row

    graph, cluster = get_graph("random-layered-200-s3"), get_cluster("v100-nvlink-4")
    start = Decision(placement=np.zeros(graph.num_ops, dtype=np.int64))
    oom = MethodResult(
        "start", "heuristic", 1e-9, False, "OOM on device 0", 0.0, 1
    )  # fast, invalid
    row = estimate_search_row(graph, cluster, start, oom, 64, 0, Simulator())
    assert row.valid and row.step_time > 1e-9
    fast = MethodResult("start", "heuristic", 1e-9, True, "", 0.0, 1)  # unbeatable valid start
    row = estimate_search_row(graph, cluster, start, fast, 64, 0, Simulator())
    assert row.valid and row.step_time == 1e-9


def test_the_decoder_search_is_a_placement_row_of_its_own():
    graph, cluster = get_graph("wavenet-tiny"), get_cluster("v100-nvlink-4")
    c = compare_on_graph(graph, cluster, "placement", budget=24, exact_max_ops=0)
    row = next(r for r in c.results if r.method == "decoder-search@24")
    assert row.kind == "search" and row.evaluations == 24 and row.decision is not None
    assert row.step_time == simulate(graph, cluster, row.decision).step_time
    assert c.best_heuristic is not None and row.step_time <= c.best_heuristic.step_time
    joint = compare_on_graph(graph, cluster, "joint", budget=8, exact_max_ops=0)
    assert not any(r.method.startswith("decoder-search") for r in joint.results)
