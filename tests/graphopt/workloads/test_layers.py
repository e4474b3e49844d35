"""Tests of graphopt.workloads.layers."""

from __future__ import annotations

from graphopt.workloads import layers, ops
from graphopt.workloads.builder import GraphBuilder


def test_dense_flattens_higher_rank_inputs() -> None:
    b = GraphBuilder("dense")
    x = ops.placeholder(b, (4, 5, 6), "x")
    y = layers.dense(b, x, 7, activation="Relu")
    g = b.build()
    assert y.shape == (4, 5, 7)
    assert g.op_types == (
        "Placeholder",
        "VariableV2",
        "VariableV2",
        "Reshape",
        "MatMul",
        "BiasAdd",
        "Relu",
        "Reshape",
    )
    assert g.flops[g.index["dense/MatMul"]] == 2 * 20 * 6 * 7
    assert g.param_bytes.sum() == 4 * (6 * 7 + 7)


def test_conv_bn_is_one_group_with_its_weights() -> None:
    b = GraphBuilder("conv")
    x = ops.placeholder(b, (2, 8, 8, 3), "x")
    with b.scope("block"):
        y = layers.conv_bn(b, x, 16, 3, scope="conv", stride=2)
    g = b.build()
    assert y.shape == (2, 4, 4, 16)
    conv_ops = [i for i, n in enumerate(g.op_names) if n.startswith("block/conv/")]
    assert {g.colocation[i] for i in conv_ops} == {"block/conv"}
    assert [g.op_types[i] for i in conv_ops] == [
        "VariableV2",
        "Conv2D",
        "VariableV2",
        "VariableV2",
        "FusedBatchNormV3",
        "Relu",
    ]
    assert g.param_bytes.sum() == 4 * (3 * 3 * 3 * 16 + 2 * 16)


def test_pre_relu_order() -> None:
    b = GraphBuilder("pre")
    x = ops.placeholder(b, (2, 8, 8, 3), "x")
    layers.conv_bn(b, x, 4, 1, scope="c", pre_relu=True)
    assert [t for t in b.build().op_types if t not in ("VariableV2", "Placeholder")] == [
        "Relu",
        "Conv2D",
        "FusedBatchNormV3",
    ]


def test_softmax_loss_and_mean_loss() -> None:
    b = GraphBuilder("loss")
    h = ops.placeholder(b, (8, 16), "h")
    labels = ops.placeholder(b, (8,), "labels")
    w, bias = b.variable("w", (16, 100)), b.variable("b", (100,))
    losses = [layers.softmax_loss(b, h, labels, w, bias, scope=f"t{t}") for t in range(3)]
    loss = layers.mean_loss(b, losses)
    g = b.build()
    assert loss.shape == ()
    assert g.op_types[g.index["loss/AddN"]] == "AddN"
    assert g.colocation[g.index["t1/MatMul"]] == "t1"
