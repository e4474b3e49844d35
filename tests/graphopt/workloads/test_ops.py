"""Tests of graphopt.workloads.ops: shapes and FLOPs checked by hand."""

from __future__ import annotations

import pytest

from graphopt.workloads import ops
from graphopt.workloads.builder import GraphBuilder


def _flops(b: GraphBuilder, name: str) -> float:
    g = b.build()
    return float(g.flops[g.index[name]])


def test_conv2d_same_and_valid() -> None:
    b = GraphBuilder("conv")
    x = ops.placeholder(b, (8, 32, 32, 3), "x")
    w = b.variable("w", (3, 3, 3, 16))
    y = ops.conv2d(b, x, w, name="same")
    z = ops.conv2d(b, x, w, stride=2, padding="VALID", name="valid")
    assert y.shape == (8, 32, 32, 16)
    assert z.shape == (8, 15, 15, 16)  # (32 - 3) // 2 + 1
    assert _flops(b, "same") == 2 * 8 * 32 * 32 * 16 * 3 * 3 * 3
    assert _flops(b, "valid") == 2 * 8 * 15 * 15 * 16 * 3 * 3 * 3


def test_dilated_and_asymmetric_conv() -> None:
    b = GraphBuilder("dil")
    x = ops.placeholder(b, (1, 1, 100, 32), "x")
    y = ops.conv2d(b, x, b.variable("w", (1, 2, 32, 32)), padding="VALID", dilation=4)
    assert y.shape == (1, 1, 96, 32)
    assert _flops(b, "Conv2D") == 2 * 96 * 32 * 2 * 32
    b2 = GraphBuilder("asym")
    x2 = ops.placeholder(b2, (2, 17, 17, 8), "x")
    y2 = ops.conv2d(b2, x2, b2.variable("w", (1, 7, 8, 4)), stride=(1, 2))
    assert y2.shape == (2, 17, 9, 4)


def test_depthwise_pool_and_batch_norm() -> None:
    b = GraphBuilder("dw")
    x = ops.placeholder(b, (2, 8, 8, 4), "x")
    d = ops.depthwise_conv2d(b, x, b.variable("dw", (3, 3, 4, 1)), stride=2)
    p = ops.pool(b, "MaxPool", x, ksize=3, stride=2, padding="VALID")
    n = ops.fused_batch_norm(b, x, b.variable("g", (4,)), b.variable("b", (4,)))
    assert d.shape == (2, 4, 4, 4) and p.shape == (2, 3, 3, 4) and n.shape == x.shape
    assert _flops(b, "depthwise") == 2 * 2 * 4 * 4 * 4 * 9
    assert _flops(b, "MaxPool") == 2 * 3 * 3 * 4 * 9
    assert len(b.op_outputs(n.op)) == 3  # y, batch mean, batch variance


def test_batch_matmul_broadcasts_batch_dims() -> None:
    b = GraphBuilder("bmm")
    q = ops.placeholder(b, (2, 3, 5, 7), "q")
    k = ops.placeholder(b, (3, 7, 11), "k")
    y = ops.batch_matmul(b, q, k)
    assert y.shape == (2, 3, 5, 11)
    assert _flops(b, "BatchMatMulV2") == 2 * 6 * 5 * 11 * 7


def test_elementwise_broadcast_and_flops() -> None:
    b = GraphBuilder("ew")
    x = ops.placeholder(b, (4, 1, 6), "x")
    y = ops.placeholder(b, (5, 1), "y")
    assert ops.binary(b, "AddV2", x, y).shape == (4, 5, 6)
    ops.unary(b, "Sigmoid", x)
    assert _flops(b, "AddV2") == 4 * 5 * 6
    assert _flops(b, "Sigmoid") == ops.FLOPS_PER_ELEMENT["Sigmoid"] * 24


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda b, x: ops.matmul(b, x, x), "inner dimensions"),
        (lambda b, x: ops.reshape(b, x, (5,)), "cannot reshape"),
        (lambda b, x: ops.binary(b, "AddV2", x, ops.placeholder(b, (3,), "z")), "do not broadcast"),
        (lambda b, x: ops.split(b, x, 3, axis=1), "not divisible"),
        (
            lambda b, x: ops.pool(b, "MinPool", ops.reshape(b, x, (1, 2, 2, 2)), ksize=2, stride=1),
            "MaxPool, AvgPool",
        ),
        (lambda b, x: ops.slice_(b, x, (3, 4)), "cannot take"),
    ],
)
def test_bad_shapes_raise_with_the_culprit(call, match) -> None:  # type: ignore[no-untyped-def]
    b = GraphBuilder("bad")
    x = ops.placeholder(b, (2, 4), "x")
    with pytest.raises(ValueError, match=match):
        call(b, x)


def test_unknown_padding() -> None:
    b = GraphBuilder("pad")
    x = ops.placeholder(b, (1, 4, 4, 1), "x")
    with pytest.raises(ValueError, match="SAME, VALID"):
        ops.conv2d(b, x, b.variable("w", (3, 3, 1, 1)), padding="FULL")
