"""Gradient rules: the backward ops that each forward op type produces (as ``tf.gradients``).

A rule receives the forward op and its incoming gradient(s) and emits gradient ops for the inputs
that need a gradient (no ``dX`` for the first layer's data input); the driver that walks the graph
and the parameter updates are in :mod:`graphopt.workloads.backward`.

Rules (``dy`` is the incoming gradient; ``x``, ``y`` are forward inputs/outputs that the gradient
op reads, so they stay live until the backward pass):

==================================  ================================================================
``MatMul`` ``y = x W``              ``dx = MatMul(dy, W^T)``, ``dW = MatMul(x^T, dy)``, each with
                                    the forward's FLOPs (``BatchMatMulV2`` likewise)
``Conv2D``                          ``Conv2DBackpropInput(W, dy)``, ``Conv2DBackpropFilter(x, dy)``,
                                    each with the forward's FLOPs (depthwise likewise)
``BiasAdd``                         ``dx = dy`` (no op), ``db = BiasAddGrad(dy)``
``AddV2``/``Sub``/``Mul``...        one elementwise op per input (``Mul(dy, other)``; ``Neg`` for
                                    ``Sub``'s second input), plus a ``Sum`` when that input was
                                    broadcast; ``AddV2``, ``AddN``, ``Identity`` pass ``dy`` through
``Tanh``/``Sigmoid``/``Relu``       ``TanhGrad(y, dy)`` / ``SigmoidGrad(y, dy)`` (3 FLOPs per
                                    element) / ``ReluGrad(dy, y)`` (1)
``Softmax``                         ``Mul``, ``Sum``, ``Sub``, ``Mul`` (TensorFlow's softmax grad)
``FusedBatchNormV3``                ``FusedBatchNormGradV3(dy, x, gamma, mean, var)`` -> dx, dgamma,
                                    dbeta (12 FLOPs per element)
``MaxPool``/``AvgPool``             ``MaxPoolGrad(x, y, dy)`` / ``AvgPoolGrad(dy)``, forward FLOPs
``Mean``/``Sum``                    ``Tile(dy)`` back to the input shape (1 FLOP per element)
data movement                       the inverse movement: ``ConcatV2`` <-> ``Slice`` per input,
                                    ``Split`` -> ``ConcatV2``, ``Pack`` <-> ``Unpack``, ``Slice`` ->
                                    ``Pad``, ``StridedSlice`` -> ``StridedSliceGrad``,
                                    ``Reshape`` -> ``Reshape``, ``Transpose`` -> ``Transpose``
``GatherV2``                        a sparse gradient (the rows ``dy`` and the ids), no op
``SparseSoftmaxCrossEntropy...``    ``Mul(dloss, backprop)`` reading the op's saved second output
==================================  ================================================================

Gradient ops are not differentiable themselves; they inherit the layer and colocation group of
their forward op and are named ``gradients/<forward op>_grad/<Type>``, as in TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from graphopt.workloads.builder import GraphBuilder, Tensor

GradRule = Callable[["GradContext"], list]


class Sparse(NamedTuple):
    """A sparse gradient (TensorFlow's ``IndexedSlices``): updated rows and their ids."""

    values: Tensor
    indices: Tensor


class GradContext:
    """What a rule sees: the forward op, its incoming gradients (``dys``, one per output, ``None``
    where an output got none), which inputs need a gradient (``want``), and :meth:`emit` to
    record gradient ops. A rule returns one gradient (or ``None``) per forward input."""

    __slots__ = ("b", "op", "prefix", "inputs", "outputs", "dys", "want", "layer", "group")

    def __init__(
        self, b: GraphBuilder, op: int, dys: list[Tensor | None], want: list[bool]
    ) -> None:
        self.b = b
        self.op = op
        self.prefix = f"gradients/{b.op_name(op)}_grad/"
        self.inputs = b.op_inputs(op)
        self.outputs = b.op_outputs(op)
        self.dys = dys
        self.want = want
        self.layer = b.op_layer(op)
        self.group = b.op_group(op)

    @property
    def dy(self) -> Tensor:
        dy = self.dys[0]
        assert dy is not None
        return dy

    def emit(
        self, op_type: str, inputs: Sequence[Tensor], shape: Sequence[int], flops: float = 0.0
    ) -> Tensor:
        return self.emit_multi(op_type, inputs, [shape], flops)[0]

    def emit_multi(
        self,
        op_type: str,
        inputs: Sequence[Tensor],
        shapes: Sequence[Sequence[int]],
        flops: float = 0.0,
    ) -> tuple[Tensor, ...]:
        return self.b.multi_op(
            op_type,
            self.prefix + op_type,
            inputs,
            shapes,
            flops=flops,
            differentiable=False,
            layer=self.layer,
            colocation=self.group,
            absolute_name=True,
        )

    def reduce_to(self, t: Tensor, shape: tuple[int, ...]) -> Tensor:
        """``t`` summed over the axes along which a forward input of ``shape`` was broadcast."""
        if t.shape == shape:
            return t
        if t.size == math.prod(shape):
            return self.emit("Reshape", (t,), shape)
        return self.emit("Sum", (t,), shape, flops=float(t.size))


# ---------------------------------------------------------------------- rules
def _pass_through(c: GradContext) -> list:
    return [
        c.reduce_to(c.dy, x.shape) if w else None for x, w in zip(c.inputs, c.want, strict=True)
    ]


def _bias_add(c: GradContext) -> list:
    x, bias = c.inputs
    db = c.emit("BiasAddGrad", (c.dy,), bias.shape, flops=float(c.dy.size)) if c.want[1] else None
    return [c.dy if c.want[0] else None, db]


def _sub(c: GradContext) -> list:
    (x, y), dy = c.inputs, c.dy
    dx = c.reduce_to(dy, x.shape) if c.want[0] else None
    dneg = c.emit("Neg", (c.reduce_to(dy, y.shape),), y.shape, float(y.size)) if c.want[1] else None
    return [dx, dneg]


def _mul(c: GradContext) -> list:
    (x, y), dy = c.inputs, c.dy
    out: list[Tensor | None] = []
    for mine, other, w in ((x, y, c.want[0]), (y, x, c.want[1])):
        if w:
            g = c.emit("Mul", (dy, other), dy.shape, flops=float(dy.size))
            out.append(c.reduce_to(g, mine.shape))
        else:
            out.append(None)
    return out


def _real_div(c: GradContext) -> list:
    (x, y), dy = c.inputs, c.dy
    dx = (
        c.reduce_to(c.emit("RealDiv", (dy, y), dy.shape, float(dy.size)), x.shape)
        if c.want[0]
        else None
    )
    dd = (
        c.reduce_to(c.emit("Mul", (dy, x, y), dy.shape, 3.0 * dy.size), y.shape)
        if c.want[1]
        else None
    )
    return [dx, dd]


def _squared_difference(c: GradContext) -> list:
    (x, y), dy = c.inputs, c.dy
    d = c.emit("Mul", (dy, x, y), dy.shape, flops=3.0 * dy.size)
    dx = c.reduce_to(d, x.shape) if c.want[0] else None
    dneg = c.emit("Neg", (c.reduce_to(d, y.shape),), y.shape, float(y.size)) if c.want[1] else None
    return [dx, dneg]


def _unary_from_output(grad_type: str, flops_per_element: float, dy_first: bool) -> GradRule:
    def rule(c: GradContext) -> list:
        y = c.outputs[0]
        ins = (c.dy, y) if dy_first else (y, c.dy)
        return [c.emit(grad_type, ins, y.shape, flops=flops_per_element * y.size)]

    return rule


def _softmax(c: GradContext) -> list:
    y, dy = c.outputs[0], c.dy
    n = float(y.size)
    m = c.emit("Mul", (dy, y), y.shape, n)
    s = c.emit("Sum", (m,), (*y.shape[:-1], 1), n)
    d = c.emit("Sub", (dy, s), y.shape, n)
    return [c.emit("Mul", (d, y), y.shape, n)]


def _matmul(c: GradContext) -> list:
    (x, w), dy = c.inputs, c.dy
    flops = c.b.op_flops(c.op)
    op_type = c.b.op_type(c.op)
    dx = dw = None
    if c.want[0]:
        batch = dy.shape[:-2]
        dx = c.reduce_to(c.emit(op_type, (dy, w), (*batch, *x.shape[-2:]), flops), x.shape)
    if c.want[1]:
        batch = dy.shape[:-2]
        dw = c.reduce_to(c.emit(op_type, (x, dy), (*batch, *w.shape[-2:]), flops), w.shape)
    return [dx, dw]


def _conv(input_type: str, filter_type: str) -> GradRule:
    def rule(c: GradContext) -> list:
        (x, w), dy = c.inputs, c.dy
        flops = c.b.op_flops(c.op)
        dx = c.emit(input_type, (w, dy), x.shape, flops) if c.want[0] else None
        dw = c.emit(filter_type, (x, dy), w.shape, flops) if c.want[1] else None
        return [dx, dw]

    return rule


def _batch_norm(c: GradContext) -> list:
    (x, gamma, beta), (_, mean, var) = c.inputs, c.outputs
    grads = c.emit_multi(
        "FusedBatchNormGradV3",
        (c.dy, x, gamma, mean, var),
        (x.shape, gamma.shape, beta.shape),
        flops=12.0 * x.size,
    )
    return [g if w else None for g, w in zip(grads, c.want, strict=True)]


def _max_pool(c: GradContext) -> list:
    x, y = c.inputs[0], c.outputs[0]
    return [c.emit("MaxPoolGrad", (x, y, c.dy), x.shape, c.b.op_flops(c.op))]


def _avg_pool(c: GradContext) -> list:
    x = c.inputs[0]
    return [c.emit("AvgPoolGrad", (c.dy,), x.shape, c.b.op_flops(c.op))]


def _reduction(c: GradContext) -> list:
    x = c.inputs[0]
    return [c.emit("Tile", (c.dy,), x.shape, float(x.size))]


def _inverse(op_type: str) -> GradRule:
    def rule(c: GradContext) -> list:
        return [c.emit(op_type, (c.dy,), c.inputs[0].shape)] + [None] * (len(c.inputs) - 1)

    return rule


def _concat(c: GradContext) -> list:
    return [
        c.emit("Slice", (c.dy,), x.shape) if w else None
        for x, w in zip(c.inputs, c.want, strict=True)
    ]


def _gather_outputs(c: GradContext, op_type: str) -> list:
    """Split/Unpack: one op assembling the outputs' gradients (zeros where an output has none)."""
    dys = [
        dy if dy is not None else c.emit("ZerosLike", (out,), out.shape)
        for dy, out in zip(c.dys, c.outputs, strict=True)
    ]
    return [c.emit(op_type, dys, c.inputs[0].shape)]


def _pack(c: GradContext) -> list:
    grads = c.emit_multi("Unpack", (c.dy,), [x.shape for x in c.inputs])
    return [g if w else None for g, w in zip(grads, c.want, strict=True)]


def _gather(c: GradContext) -> list:
    table, ids = c.inputs
    return [Sparse(c.dy, ids) if c.want[0] else None, None]


def _sparse_xent(c: GradContext) -> list:
    logits, backprop = c.inputs[0], c.outputs[1]
    return [c.emit("Mul", (c.dy, backprop), logits.shape, float(logits.size)), None]


RULES: dict[str, GradRule] = {
    "Identity": _pass_through,
    "AddN": _pass_through,
    "AddV2": _pass_through,
    "Add": _pass_through,
    "BiasAdd": _bias_add,
    "Sub": _sub,
    "Mul": _mul,
    "RealDiv": _real_div,
    "SquaredDifference": _squared_difference,
    "Tanh": _unary_from_output("TanhGrad", 3.0, dy_first=False),
    "Sigmoid": _unary_from_output("SigmoidGrad", 3.0, dy_first=False),
    "Rsqrt": _unary_from_output("RsqrtGrad", 3.0, dy_first=False),
    "Relu": _unary_from_output("ReluGrad", 1.0, dy_first=True),
    "Exp": _unary_from_output("Mul", 1.0, dy_first=True),
    "Softmax": _softmax,
    "MatMul": _matmul,
    "BatchMatMulV2": _matmul,
    "Conv2D": _conv("Conv2DBackpropInput", "Conv2DBackpropFilter"),
    "DepthwiseConv2dNative": _conv(
        "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"
    ),
    "FusedBatchNormV3": _batch_norm,
    "MaxPool": _max_pool,
    "AvgPool": _avg_pool,
    "Mean": _reduction,
    "Sum": _reduction,
    "ConcatV2": _concat,
    "Split": lambda c: _gather_outputs(c, "ConcatV2"),
    "Unpack": lambda c: _gather_outputs(c, "Pack"),
    "Pack": _pack,
    "Slice": _inverse("Pad"),
    "StridedSlice": _inverse("StridedSliceGrad"),
    "Pad": _inverse("Slice"),
    "Reshape": _inverse("Reshape"),
    "Transpose": _inverse("Transpose"),
    "GatherV2": _gather,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_xent,
}
"""Gradient rules by key (an op's ``grad_rule``, by default its type)."""
