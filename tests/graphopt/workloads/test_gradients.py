"""Tests of graphopt.workloads.gradients: the backward rules and the update ops."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.graph import CompGraph
from graphopt.workloads import layers, ops
from graphopt.workloads.backward import ADDN_MAX_INPUTS, OPTIMIZERS, add_backward
from graphopt.workloads.builder import GraphBuilder


def _types_by_prefix(g: CompGraph, prefix: str) -> list[str]:
    return [t for n, t in zip(g.op_names, g.op_types, strict=True) if n.startswith(prefix)]


def _edges(g: CompGraph) -> set[tuple[str, str]]:
    return {
        (g.op_names[s], g.op_names[d])
        for s, d in zip(g.edge_src.tolist(), g.edge_dst.tolist(), strict=True)
    }


def _two_matmuls(optimizer: str = "sgd") -> CompGraph:
    """x -> MatMul(w1) -> h -> MatMul(w2) -> Mean: the first MatMul's input is data."""
    b = GraphBuilder("mm")
    x = ops.placeholder(b, (16, 32), "x")
    h = ops.matmul(b, x, b.variable("w1", (32, 64)), name="mm1")
    y = ops.matmul(b, h, b.variable("w2", (64, 8)), name="mm2")
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1)), optimizer=optimizer)
    return b.build()


def test_matmul_backward_has_two_grad_ops_with_forward_flops() -> None:
    g = _two_matmuls()
    mm2 = g.index["mm2"]
    names = [n for n in g.op_names if n.startswith("gradients/mm2_grad/")]
    assert names == ["gradients/mm2_grad/MatMul", "gradients/mm2_grad/MatMul_1"]
    dx, dw = (g.index[n] for n in names)
    assert g.flops[dx] == g.flops[dw] == g.flops[mm2] == 2 * 16 * 64 * 8
    assert g.output_bytes[dx] == 4 * 16 * 64  # dh
    assert g.output_bytes[dw] == 4 * 64 * 8  # dW2
    edges = _edges(g)
    assert ("w2", "gradients/mm2_grad/MatMul") in edges  # dX = dY W^T reads W
    assert ("mm1", "gradients/mm2_grad/MatMul_1") in edges  # dW = X^T dY reads the activation


def test_no_gradient_for_data_inputs() -> None:
    g = _two_matmuls()
    assert _types_by_prefix(g, "gradients/mm1_grad/") == ["MatMul"]  # only dW1


def test_updates_one_per_variable_and_colocated() -> None:
    g = _two_matmuls()
    for var in ("w1", "w2"):
        update = g.index[f"train/update_{var}/ApplyGradientDescent"]
        assert g.colocation[update] == g.colocation[g.index[var]]
        p = g.param_bytes[g.index[var]]
        assert g.bytes_accessed[update] == 3 * p  # read weight and gradient, write weight
    # gradient ops share the group of their forward op
    assert g.colocation[g.index["gradients/mm2_grad/MatMul"]] == g.colocation[g.index["mm2"]]


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_optimizer_slots_are_resident(optimizer: str) -> None:
    g = _two_matmuls(optimizer)
    opt = OPTIMIZERS[optimizer]
    update = g.index[f"train/update_w2/{opt.dense_op}"]
    p = 4 * 64 * 8
    assert g.param_bytes[update] == opt.slots * p
    assert g.bytes_accessed[update] == (3 + 2 * opt.slots) * p
    assert g.flops[update] == opt.flops_per_element * 64 * 8


def test_unknown_optimizer() -> None:
    b = GraphBuilder("opt")
    x = ops.placeholder(b, (2, 2), "x")
    loss = ops.reduce(b, "Mean", ops.matmul(b, x, b.variable("w", (2, 2))), (0, 1))
    with pytest.raises(ValueError, match="choose one of: sgd, momentum, adam"):
        add_backward(b, loss, optimizer="lamb")


def test_conv_backward() -> None:
    b = GraphBuilder("conv")
    x = ops.placeholder(b, (4, 16, 16, 8), "x")
    h = ops.unary(b, "Relu", ops.conv2d(b, x, b.variable("w1", (3, 3, 8, 8)), name="c1"))
    y = ops.conv2d(b, h, b.variable("w2", (3, 3, 8, 4)), name="c2")
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1, 2, 3)))
    g = b.build()
    assert sorted(_types_by_prefix(g, "gradients/c2_grad/")) == [
        "Conv2DBackpropFilter",
        "Conv2DBackpropInput",
    ]
    assert _types_by_prefix(g, "gradients/c1_grad/") == ["Conv2DBackpropFilter"]
    for n in ("gradients/c2_grad/Conv2DBackpropInput", "gradients/c2_grad/Conv2DBackpropFilter"):
        assert g.flops[g.index[n]] == g.flops[g.index["c2"]]
    assert ("Relu", "gradients/Relu_grad/ReluGrad") in _edges(g)  # ReluGrad reads the output


def test_several_consumers_are_summed_by_addn() -> None:
    b = GraphBuilder("fanout")
    x = ops.placeholder(b, (4, 8), "x")
    h = ops.matmul(b, x, b.variable("w", (8, 8)))
    y = ops.binary(b, "AddV2", ops.unary(b, "Tanh", h), ops.unary(b, "Sigmoid", h))
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1)))
    g = b.build()
    addn = g.index["gradients/MatMul/AddN"]
    assert g.op_types[addn] == "AddN" and g.flops[addn] == 4 * 8
    edges = _edges(g)
    assert ("gradients/Tanh_grad/TanhGrad", "gradients/MatMul/AddN") in edges
    assert ("gradients/Sigmoid_grad/SigmoidGrad", "gradients/MatMul/AddN") in edges


def test_shared_weight_gradients_summed_once_per_variable() -> None:
    b = GraphBuilder("shared")
    h = ops.placeholder(b, (4, 8), "x")
    w = b.variable("w", (8, 8))
    for t in range(3):
        h = ops.unary(b, "Tanh", ops.matmul(b, h, w, name=f"mm{t}"))
    add_backward(b, ops.reduce(b, "Mean", h, (0, 1)))
    g = b.build()
    assert g.param_bytes.sum() == 4 * 8 * 8
    agg = g.index["gradients/w/AddN"]
    assert np.sum(g.edge_dst == agg) == 3
    assert [n for n in g.op_names if n.startswith("train/")] == [
        "train/update_w/ApplyGradientDescent"
    ]


def test_many_contributions_are_accumulated_as_they_arrive() -> None:
    b = GraphBuilder("accumulate")
    h = ops.placeholder(b, (4, 8), "x")
    w = b.variable("w", (8, 8))
    steps = ADDN_MAX_INPUTS + 2
    for t in range(steps):
        h = ops.unary(b, "Tanh", ops.matmul(b, h, w, name=f"mm{t}"))
    add_backward(b, ops.reduce(b, "Mean", h, (0, 1)))
    g = b.build()
    acc = [i for i, n in enumerate(g.op_names) if n.startswith("gradients/w/accumulate")]
    assert len(acc) == steps - 1 and "gradients/w/AddN" not in g.index
    assert all(g.op_types[i] == "AddV2" for i in acc)
    # each step's dW is added before the next (earlier) step's backward starts
    first_acc = acc[0]
    assert first_acc < g.index[f"gradients/mm{steps - 3}_grad/MatMul"]
    update = g.index["train/update_w/ApplyGradientDescent"]
    assert (acc[-1], update) in set(zip(g.edge_src.tolist(), g.edge_dst.tolist(), strict=True))


def test_broadcast_input_gets_a_sum() -> None:
    b = GraphBuilder("bcast")
    x = ops.placeholder(b, (4, 8), "x")
    h = ops.matmul(b, x, b.variable("w", (8, 8)))
    y = ops.binary(b, "Mul", h, b.variable("scale", (8,)))
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1)))
    g = b.build()
    assert sorted(_types_by_prefix(g, "gradients/Mul_grad/")) == ["Mul", "Mul", "Sum"]


def test_embedding_gradient_is_sparse() -> None:
    b = GraphBuilder("emb")
    ids = ops.placeholder(b, (4, 3), "ids")
    with b.scope("embedding"):
        table = b.variable("embedding", (1000, 16))
        e1 = ops.gather(b, table, ids, name="lookup1")
        e2 = ops.gather(b, table, ids, name="lookup2")
    y = ops.binary(b, "AddV2", e1, e2)
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1, 2)))
    g = b.build()
    update = g.index["train/update_embedding/embedding/ScatterSub"]
    rows = 2 * 4 * 3 * 16 * 4  # two lookups of 12 rows of 16 floats
    assert g.bytes_accessed[update] < g.param_bytes[g.index["embedding/embedding"]]
    assert g.op_types[g.index["gradients/embedding/embedding/concat_values"]] == "ConcatV2"
    assert g.output_bytes[g.index["gradients/embedding/embedding/concat_values"]] == rows
    gather = g.index["embedding/lookup1"]
    assert g.bytes_accessed[gather] == 2 * 4 * 3 * 16 * 4 + 4 * 3 * 4  # rows read + written, ids


def test_layer_norm_backward_builds() -> None:
    b = GraphBuilder("ln")
    x = ops.placeholder(b, (4, 6, 8), "x")
    h = layers.dense(b, x, 8)
    y = layers.layer_norm(b, h)
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1, 2)))
    g = b.build()
    fwd = [t for n, t in zip(g.op_names, g.op_types, strict=True) if n.startswith("LayerNorm/")]
    assert len(fwd) == 13  # 11 ops and 2 variables
    assert {"RsqrtGrad", "Neg", "Tile", "Sum"} <= set(g.op_types)
    assert not any(
        n.startswith("gradients/LayerNorm/moments/StopGradient_grad") for n in g.op_names
    )


def test_missing_rule_names_the_op() -> None:
    b = GraphBuilder("norule")
    x = ops.placeholder(b, (2, 2), "x")
    h = ops.matmul(b, x, b.variable("w", (2, 2)))
    y = b.op("Erf", "erf", (h,), h.shape)
    with pytest.raises(ValueError, match="'erf' of type 'Erf' has no gradient rule"):
        add_backward(b, ops.reduce(b, "Mean", y, (0, 1)))


def test_stop_gradient_blocks() -> None:
    b = GraphBuilder("stop")
    x = ops.placeholder(b, (2, 2), "x")
    h = ops.matmul(b, x, b.variable("w", (2, 2)))
    s = b.op("StopGradient", "stop", (h,), h.shape, differentiable=False)
    y = ops.binary(b, "Mul", s, b.variable("v", (2, 2)))
    add_backward(b, ops.reduce(b, "Mean", y, (0, 1)))
    g = b.build()
    assert "train/update_w/ApplyGradientDescent" not in g.index
    assert "train/update_v/ApplyGradientDescent" in g.index
