"""Every split of the contiguous-split placers (Tarnawski et al.'s greedy and max-load DP,
PipeDream's planner) is contiguous on the block DAG (:mod:`graphopt.blocks`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers_baselines import random_cluster

from graphopt.baselines.pipedream_planner import pipedream_planner
from graphopt.baselines.tarnawski import _accelerators, latency_greedy, max_load_dp
from graphopt.blocks import block_dag, is_contiguous
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.workloads import layered_dag, series_parallel_dag

# --- target: every split of the contiguous placers is contiguous on the block DAG --------------


def coloured(graph: CompGraph, seed: int) -> CompGraph:
    """``graph`` with random colour classes: each op joins one of a few colours or stays alone."""
    rng = np.random.default_rng(seed)
    colours = int(rng.integers(1, 5))
    share = float(rng.uniform(0.0, 0.5))
    colour = [f"c{rng.integers(colours)}" if rng.random() < share else "" for _ in graph.op_names]
    return dataclasses.replace(graph, colocation=tuple(colour), layer=("",) * graph.num_ops)


def cpu_and_accelerators(seed: int) -> Cluster:
    """A CPU with all the memory and two or three accelerators that hold about half a graph."""
    rng = np.random.default_rng(seed)
    num_acc = int(rng.integers(2, 4))
    devices = (Device("cpu", "CPU", 1e11, 1e11, 1e12, 0.0),) + tuple(
        Device(f"a{i}", "acc", 1e12, 1e12, float(rng.uniform(2e4, 6e4)), 0.0)
        for i in range(num_acc)
    )
    n = len(devices)
    return Cluster("cpu+acc", devices, np.full((n, n), 1e10), np.full((n, n), 1e-6))


def with_params(graph: CompGraph, seed: int) -> CompGraph:
    rng = np.random.default_rng(seed)
    return dataclasses.replace(graph, param_bytes=rng.uniform(0, 4e3, graph.num_ops))


def check_contiguous(graph: CompGraph, cluster: Cluster) -> int:
    """Assert the contiguity of every placer's split; return how many placers ran."""
    dag = block_dag(graph)
    _, cpu = _accelerators(cluster)
    ran = 0
    for placer in (latency_greedy, max_load_dp, pipedream_planner):
        try:
            placement = placer(graph, cluster)
        except ValueError as e:
            assert "ideals" in str(e) or "fit no" in str(e), e
            continue
        stage = np.full(dag.num_blocks, -1)
        stage[dag.block] = placement
        assert np.array_equal(stage[dag.block], placement), "a block split across devices"
        alone = np.array([cpu]) if placer is latency_greedy and cpu >= 0 else None
        assert is_contiguous(dag, stage, singletons=alone), (placer.__name__, graph.name)
        ran += 1
    return ran


def random_cases(count: int):
    rng = np.random.default_rng(41)
    for k in range(count):
        n = int(rng.integers(6, 28))
        maker = layered_dag if k % 2 == 0 else series_parallel_dag
        graph = with_params(coloured(maker(n, seed=k), seed=k), seed=k)
        cluster = cpu_and_accelerators(k) if k % 3 == 0 else random_cluster(2 + k % 3, seed=k)
        yield graph, cluster


def test_splits_are_contiguous_on_random_graphs_with_random_colour_classes():
    ran = sum(check_contiguous(graph, cluster) for graph, cluster in random_cases(40))
    assert ran >= 100  # of 120: the DP may refuse a graph with too many ideals


@pytest.mark.expensive
def test_splits_are_contiguous_on_500_random_graphs():
    ran = sum(check_contiguous(graph, cluster) for graph, cluster in random_cases(500))
    assert ran >= 1250
