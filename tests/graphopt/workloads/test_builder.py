"""Tests of graphopt.workloads.builder: recording, names, groups, edges and bytes."""

from __future__ import annotations

import math

import pytest

from graphopt.workloads import ops
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import BYTES_PER_ELEMENT, GraphBuilder, Tensor


def test_dense_layer_costs_by_hand() -> None:
    b = GraphBuilder("dense")
    x = ops.placeholder(b, (32, 784), "x")
    w = b.variable("kernel", (784, 10))
    y = ops.matmul(b, x, w)
    g = b.build()
    i = g.index["MatMul"]
    assert y.shape == (32, 10)
    assert g.flops[i] == 2 * 32 * 784 * 10
    assert g.output_bytes[i] == 4 * 32 * 10
    assert g.bytes_accessed[i] == 4 * (32 * 784 + 784 * 10 + 32 * 10)
    # the weight is counted once, on its variable op, which produces no activation
    v = g.index["kernel"]
    assert g.param_bytes[v] == 4 * 784 * 10 and g.output_bytes[v] == 0
    assert g.param_bytes.sum() == 4 * 784 * 10
    # an edge carries the tensor the consumer reads
    assert dict(zip(g.edge_src.tolist(), g.edge_bytes.tolist(), strict=True))[v] == 4 * 784 * 10


def test_tensor_bytes() -> None:
    t = Tensor(0, (2, 3, 4))
    assert t.size == 24 and t.nbytes == 24 * BYTES_PER_ELEMENT


def test_scopes_unique_names_and_layers() -> None:
    b = GraphBuilder("names")
    x = ops.placeholder(b, (2, 2), "x")
    with b.scope("enc", layer="encoder"), b.scope("t0"):
        a = ops.unary(b, "Relu", x)
        ops.unary(b, "Relu", a)
        assert b.current_scope == "enc/t0"
    assert b.current_scope == ""
    g = b.build()
    assert g.op_names == ("x", "enc/t0/Relu", "enc/t0/Relu_1")
    assert g.layer == ("", "encoder", "encoder")


def test_variable_joins_group_of_first_reader() -> None:
    b = GraphBuilder("groups")
    x = ops.placeholder(b, (4, 8), "x")
    w = b.variable("w", (8, 8))
    with b.scope("step0", colocation="layer/t0"):
        h = ops.matmul(b, x, w)
    with b.scope("step1", colocation="layer/t1"):
        ops.matmul(b, h, w)
    g = b.build()
    assert g.colocation[g.index["w"]] == "layer/t0"
    assert g.colocation[g.index["step1/MatMul"]] == "layer/t1"
    assert g.colocation[g.index["x"]] == "x"  # default: the op's own name


def test_multi_output_edges_carry_only_the_outputs_read() -> None:
    b = GraphBuilder("split")
    x = ops.placeholder(b, (4, 16), "x")
    parts = ops.split(b, x, 4, axis=1)
    y = ops.binary(b, "Mul", parts[0], parts[2])
    ops.binary(b, "Mul", y, y, name="square")  # the same tensor twice is read once
    g = b.build()
    s, m, sq = g.index["Split"], g.index["Mul"], g.index["square"]
    edges = {
        (a, c): nb
        for a, c, nb in zip(
            g.edge_src.tolist(), g.edge_dst.tolist(), g.edge_bytes.tolist(), strict=True
        )
    }
    assert edges[(s, m)] == 2 * 4 * 4 * 4
    assert edges[(m, sq)] == 4 * 4 * 4
    assert g.bytes_accessed[sq] == 2 * 4 * 4 * 4
    assert g.output_bytes[s] == 4 * 4 * 16


def test_unknown_input_is_rejected() -> None:
    b = GraphBuilder("bad")
    with pytest.raises(ValueError, match="not an output of a recorded op"):
        ops.unary(b, "Relu", Tensor(3, (2,)))


def test_add_backward_twice_or_inside_a_scope_is_rejected() -> None:
    b = GraphBuilder("twice")
    x = ops.placeholder(b, (2, 3), "x")
    loss = ops.reduce(b, "Mean", ops.matmul(b, x, b.variable("w", (3, 1))), (0, 1))
    with b.scope("s"), pytest.raises(ValueError, match="outside of any scope"):
        add_backward(b, loss)
    add_backward(b, loss)
    with pytest.raises(ValueError, match="already called"):
        add_backward(b, loss)


def test_docstring_example_counts() -> None:
    b = GraphBuilder("mlp")
    x = b.source("Placeholder", "x", (32, 784))
    w = b.variable("dense/kernel", (784, 10))
    loss = ops.reduce(b, "Mean", ops.matmul(b, x, w), axes=(0, 1))
    add_backward(b, loss)
    g = b.build()
    assert g.num_ops == 8
    assert list(g.op_names) == list(b.build().op_names)  # the recording order is topological


def test_shapes_are_recorded_and_agree_with_the_bytes() -> None:
    b = GraphBuilder("dense")
    x = ops.placeholder(b, (32, 784), "x")
    w = b.variable("kernel", (784, 10))
    ops.matmul(b, x, w)
    g = b.build()
    mm, v, p = g.index["MatMul"], g.index["kernel"], g.index["x"]
    assert g.output_shapes[mm] == ((32, 10),) and g.output_dtypes[mm] == ("float32",)
    assert g.input_shapes[mm] == ((32, 784), (784, 10))
    assert g.output_shapes[v] == ((784, 10),) and g.output_dtypes[v] is None  # bytes: params
    assert g.output_dtypes[p] is None  # data may be int32 ids
    for i in range(g.num_ops):  # every known output adds up to the op's output bytes
        if g.output_dtypes[i] is not None:
            size = sum(4 * math.prod(s) for s in g.output_shapes[i])
            assert size == g.output_bytes[i]
