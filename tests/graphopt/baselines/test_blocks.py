from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers_baselines import random_cluster, training_graph

from graphopt.baselines.blocks import block_dag, forward_ops, is_contiguous, op_groups
from graphopt.baselines.pipedream_planner import pipedream_planner
from graphopt.baselines.tarnawski import _accelerators, latency_greedy, max_load_dp
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device
from graphopt.workloads import layered_dag, series_parallel_dag


def graph_of(edges: list[tuple[str, str]], colour: dict[str, str], **metadata) -> CompGraph:
    names = list(dict.fromkeys(n for e in edges for n in e))
    ops = [Op(n, "X", flops=1e12, colocation=colour.get(n, "")) for n in names]
    return CompGraph.build("g", ops, [(a, b, 1.0) for a, b in edges], metadata=metadata)


def blocks_by_name(g: CompGraph) -> list[list[str]]:
    dag = block_dag(g)
    return [
        sorted(n for n, b in zip(g.op_names, dag.block.tolist(), strict=True) if b == k)
        for k in range(dag.num_blocks)
    ]


def test_colour_classes_of_a_training_graph():
    g = training_graph()
    group, count = op_groups(g)
    assert count == 3
    assert dict(zip(g.op_names, group.tolist(), strict=True)) == {
        "fwd0": 0,
        "p0": 1,
        "fwd1": 2,
        "bwd1": 2,
        "bwd0": 0,
    }
    assert forward_ops(g) == 3
    # Forward edges order l0 and p0 before l1; the gradient edge back from l1 to l0 does not
    # fuse them (it would as an inference graph).
    assert blocks_by_name(g) == [["bwd0", "fwd0"], ["p0"], ["bwd1", "fwd1"]]
    inference = dataclasses.replace(g, metadata={})
    assert forward_ops(inference) == 5
    assert blocks_by_name(inference) == [["p0"], ["bwd0", "bwd1", "fwd0", "fwd1"]]


def test_a_class_tying_an_early_weight_to_a_late_consumer_fuses_what_lies_between():
    # w and y share a class; w -> x1 -> x2 -> y makes {w, y}, x1, x2 mutually reachable.
    g = graph_of([("w", "x1"), ("x1", "x2"), ("x2", "y"), ("y", "z")], {"w": "A", "y": "A"})
    assert blocks_by_name(g) == [["w", "x1", "x2", "y"], ["z"]]
    dag = block_dag(g)
    assert (dag.edge_src.tolist(), dag.edge_dst.tolist()) == ([0], [1])


def test_diamond_with_a_class_across_its_branches():
    # a -> b, a -> c, b -> d, c -> d; b and c share a class: a chain of three blocks.
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]
    assert blocks_by_name(graph_of(edges, {"b": "B", "c": "B"})) == [["a"], ["b", "c"], ["d"]]
    # a and d share a class instead: the whole diamond is one block.
    assert blocks_by_name(graph_of(edges, {"a": "A", "d": "A"})) == [["a", "b", "c", "d"]]


def test_order_is_topological_then_by_first_op():
    # Two independent chains: the blocks alternate by first op, as the ops do.
    g = graph_of([("a", "b"), ("c", "d")], {})
    dag = block_dag(g)
    assert dag.block.tolist() == list(range(4))
    assert np.all(dag.edge_src < dag.edge_dst)


def test_a_backward_only_class_stands_in_by_its_mirror_image():
    # Forward f0 -> f1; backward b1 -> g -> b0 where g is a class of its own (backward only):
    # mirrored, g sits between l0 and l1.
    ops = [
        Op("f0", "X", colocation="l0"),
        Op("f1", "X", colocation="l1"),
        Op("b1", "X", colocation="l1"),
        Op("g", "X", colocation="G"),
        Op("b0", "X", colocation="l0"),
    ]
    edges = [("f0", "f1", 1.0), ("f1", "b1", 1.0), ("b1", "g", 1.0), ("g", "b0", 1.0)]
    g = CompGraph.build("t", ops, edges, metadata={"training": True, "forward_ops": 2})
    assert blocks_by_name(g) == [["b0", "f0"], ["g"], ["b1", "f1"]]
    # Without the training flag the graph is all forward: the classes fuse.
    assert forward_ops(dataclasses.replace(g, metadata={"forward_ops": 2})) == 5


def test_is_contiguous():
    g = graph_of([("a", "b"), ("b", "c"), ("c", "d")], {})
    dag = block_dag(g)
    assert is_contiguous(dag, np.array([0, 0, 1, 1]))
    assert is_contiguous(dag, np.array([1, 1, 0, 0]))  # stage names need no order
    assert not is_contiguous(dag, np.array([0, 1, 0, 1]))
    # Device 2 runs each of its blocks alone (the greedy's CPU): a and c there are fine.
    assert is_contiguous(dag, np.array([2, 0, 2, 1]), singletons=np.array([2]))
    assert not is_contiguous(dag, np.array([0, 2, 0, 1]), singletons=np.array([2]))


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
