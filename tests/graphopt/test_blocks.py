from __future__ import annotations

import dataclasses

import numpy as np

from graphopt.blocks import block_dag, class_names, forward_ops, is_contiguous, op_groups
from graphopt.graph import CompGraph, Op


def training_graph() -> CompGraph:
    """fwd0 -> fwd1 -> bwd1 -> bwd0 (layer l's forward and backward in colour l), fwd0 feeding
    bwd0, p0 (no colour) feeding fwd1; the first three ops are the forward pass."""
    ops = [
        Op("fwd0", "X", flops=1e12, colocation="l0"),
        Op("p0", "X", flops=2e12),
        Op("fwd1", "X", flops=1e12, colocation="l1"),
        Op("bwd1", "X", flops=2e12, colocation="l1"),
        Op("bwd0", "X", flops=2e12, colocation="l0"),
    ]
    edges = [("fwd0", "fwd1"), ("fwd0", "bwd1"), ("fwd0", "bwd0"), ("p0", "fwd1")]
    edges += [("fwd1", "bwd1"), ("bwd1", "bwd0")]
    ops_edges = [(a, b, 1.0) for a, b in edges]
    return CompGraph.build("train", ops, ops_edges, metadata={"training": True, "forward_ops": 3})


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


def test_class_names_for_messages():
    g = graph_of([("w", "x"), ("x", "y"), ("y", "z")], {"w": "A", "y": "A", "z": "B"})
    ops = {n: i for i, n in enumerate(g.op_names)}
    assert class_names(g, np.array([ops["w"], ops["x"], ops["y"]])) == "colour class 'A'"
    assert class_names(g, np.array([ops["y"], ops["z"]])) == "colour classes 'A', 'B'"
    assert class_names(g, np.array([ops["x"]])) == "op 'x'"
