"""TensorFlow op primitives: output shapes and FLOPs of one op from its input shapes.

Each helper records one op on a :class:`~graphopt.workloads.builder.GraphBuilder` and returns its
output tensor(s). Layouts follow TensorFlow's defaults: images ``NHWC``, conv filters
``[kh, kw, c_in, c_out]``, matrices ``[rows, cols]``.

FLOP counts (a multiply-add is 2 FLOPs):

=============================  ==================================================================
``MatMul`` ``[M,K]x[K,N]``     ``2 M N K``
``BatchMatMulV2``              ``2 * batch * M N K`` (batch dims broadcast)
``Conv2D``                     ``2 * B * H_out * W_out * C_out * kh * kw * C_in``
``DepthwiseConv2dNative``      ``2 * B * H_out * W_out * C * kh * kw`` (channel multiplier 1)
``MaxPool`` / ``AvgPool``      ``B * H_out * W_out * C * kh * kw``
``FusedBatchNormV3``           8 per element (mean, variance, normalise, scale and shift)
elementwise                    per output element: 4 for ``Sigmoid``, ``Tanh``, ``Exp``, ``Rsqrt``,
                               ``Sin``, ``Cos``;
                               5 for ``Softmax`` (max, subtract, exp, sum, divide); 3 for
                               ``SquaredDifference``; 1 for the rest (``Add``, ``Mul``, ``Relu``...)
reductions                     one per input element (``Sum``, ``Mean``, ``BiasAddGrad``...)
data movement                  0 (``Reshape``, ``ConcatV2``, ``Split``, ``Slice``, ``Pad``,
                               ``Pack``, ``Unpack``, ``Transpose``, ``GatherV2``)
``SparseSoftmaxCrossEntropy``  6 per logit (softmax, log, gradient)
=============================  ==================================================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from graphopt.workloads.builder import GraphBuilder, Tensor

FLOPS_PER_ELEMENT: dict[str, float] = {
    "Sigmoid": 4.0,
    "Tanh": 4.0,
    "Exp": 4.0,
    "Rsqrt": 4.0,
    "Sin": 4.0,
    "Cos": 4.0,
    "Softmax": 5.0,
    "SquaredDifference": 3.0,
    "FusedBatchNormV3": 8.0,
    "SparseSoftmaxCrossEntropyWithLogits": 6.0,
}
"""FLOPs per output element of elementwise ops; ops not listed cost 1."""

Shape = tuple[int, ...]


def elementwise_flops(op_type: str, size: int) -> float:
    """FLOPs of an elementwise op with ``size`` output elements."""
    return FLOPS_PER_ELEMENT.get(op_type, 1.0) * size


def broadcast_shape(a: Shape, b: Shape) -> Shape:
    """NumPy broadcasting of two shapes.

    Raises:
        ValueError: the shapes do not broadcast.
    """
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


# ---------------------------------------------------------------------- sources
def fill(b: GraphBuilder, shape: Sequence[int], name: str = "zeros") -> Tensor:
    """A constant tensor (``Fill``), e.g. an RNN's zero state."""
    return b.source("Fill", name, shape)


def placeholder(b: GraphBuilder, shape: Sequence[int], name: str) -> Tensor:
    """Input data (``Placeholder``: token ids, labels, images)."""
    return b.source("Placeholder", name, shape)


# ---------------------------------------------------------------------- elementwise
def unary(b: GraphBuilder, op_type: str, x: Tensor, name: str | None = None) -> Tensor:
    """An elementwise op of one input (``Relu``, ``Tanh``, ``Sigmoid``, ``Rsqrt``...)."""
    return b.op(op_type, name or op_type, (x,), x.shape, flops=elementwise_flops(op_type, x.size))


def binary(b: GraphBuilder, op_type: str, x: Tensor, y: Tensor, name: str | None = None) -> Tensor:
    """An elementwise op of two inputs with broadcasting (``AddV2``, ``Sub``, ``Mul``,
    ``RealDiv``, ``SquaredDifference``)."""
    shape = broadcast_shape(x.shape, y.shape)
    return b.op(
        op_type, name or op_type, (x, y), shape, flops=elementwise_flops(op_type, math.prod(shape))
    )


def add_n(b: GraphBuilder, xs: Sequence[Tensor], name: str = "AddN") -> Tensor:
    """Sum of ``k`` same-shaped tensors: ``(k - 1) * size`` FLOPs."""
    if len(xs) == 1:
        return xs[0]
    return b.op("AddN", name, xs, xs[0].shape, flops=(len(xs) - 1) * xs[0].size)


def bias_add(b: GraphBuilder, x: Tensor, bias: Tensor, name: str = "BiasAdd") -> Tensor:
    """``x + bias`` over the last axis."""
    return b.op("BiasAdd", name, (x, bias), x.shape, flops=x.size)


def softmax(b: GraphBuilder, x: Tensor, name: str = "Softmax") -> Tensor:
    """Softmax over the last axis."""
    return b.op("Softmax", name, (x,), x.shape, flops=elementwise_flops("Softmax", x.size))


# ---------------------------------------------------------------------- contractions
def matmul(b: GraphBuilder, x: Tensor, w: Tensor, name: str = "MatMul") -> Tensor:
    """``[M, K] x [K, N] -> [M, N]``; ``2 M N K`` FLOPs.

    Raises:
        ValueError: the inner dimensions differ.
    """
    (m, k), (k2, n) = x.shape, w.shape
    if k != k2:
        raise ValueError(f"MatMul {name!r}: inner dimensions differ: {x.shape} x {w.shape}")
    return b.op("MatMul", name, (x, w), (m, n), flops=2.0 * m * n * k)


def batch_matmul(b: GraphBuilder, x: Tensor, y: Tensor, name: str = "BatchMatMulV2") -> Tensor:
    """``[..., M, K] x [..., K, N] -> [..., M, N]`` with broadcast batch dimensions."""
    m, k = x.shape[-2:]
    k2, n = y.shape[-2:]
    if k != k2:
        raise ValueError(f"BatchMatMulV2 {name!r}: inner dimensions differ: {x.shape} x {y.shape}")
    batch = broadcast_shape(x.shape[:-2], y.shape[:-2])
    flops = 2.0 * math.prod(batch) * m * n * k
    return b.op("BatchMatMulV2", name, (x, y), (*batch, m, n), flops=flops)


def _conv_out(size: int, k: int, stride: int, padding: str, dilation: int = 1) -> int:
    if padding == "SAME":
        return -(-size // stride)
    if padding == "VALID":
        return (size - (k - 1) * dilation - 1) // stride + 1
    raise ValueError(f"unknown padding {padding!r}; choose one of: SAME, VALID")


def conv2d(
    b: GraphBuilder,
    x: Tensor,
    w: Tensor,
    *,
    stride: int | tuple[int, int] = 1,
    padding: str = "SAME",
    dilation: int = 1,
    name: str = "Conv2D",
) -> Tensor:
    """NHWC convolution with filter ``w = [kh, kw, c_in, c_out]``."""
    bs, h, wd, c = x.shape
    kh, kw, cin, cout = w.shape
    if cin != c:
        raise ValueError(f"Conv2D {name!r}: input has {c} channels, filter expects {cin}")
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ho = _conv_out(h, kh, sh, padding, dilation)
    wo = _conv_out(wd, kw, sw, padding, dilation)
    flops = 2.0 * bs * ho * wo * cout * kh * kw * cin
    return b.op("Conv2D", name, (x, w), (bs, ho, wo, cout), flops=flops)


def depthwise_conv2d(
    b: GraphBuilder,
    x: Tensor,
    w: Tensor,
    *,
    stride: int = 1,
    padding: str = "SAME",
    name: str = "depthwise",
) -> Tensor:
    """Depthwise NHWC convolution with filter ``[kh, kw, c, 1]``."""
    bs, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    ho, wo = _conv_out(h, kh, stride, padding), _conv_out(wd, kw, stride, padding)
    flops = 2.0 * bs * ho * wo * c * kh * kw
    return b.op("DepthwiseConv2dNative", name, (x, w), (bs, ho, wo, c), flops=flops)


def pool(
    b: GraphBuilder,
    op_type: str,
    x: Tensor,
    *,
    ksize: int,
    stride: int,
    padding: str = "SAME",
    name: str | None = None,
) -> Tensor:
    """``MaxPool`` or ``AvgPool`` over square windows."""
    if op_type not in ("MaxPool", "AvgPool"):
        raise ValueError(f"unknown pooling op {op_type!r}; choose one of: MaxPool, AvgPool")
    bs, h, wd, c = x.shape
    ho, wo = _conv_out(h, ksize, stride, padding), _conv_out(wd, ksize, stride, padding)
    flops = float(bs * ho * wo * c * ksize * ksize)
    return b.op(op_type, name or op_type, (x,), (bs, ho, wo, c), flops=flops)


def fused_batch_norm(
    b: GraphBuilder, x: Tensor, gamma: Tensor, beta: Tensor, name: str = "FusedBatchNormV3"
) -> Tensor:
    """Training-mode batch normalisation over the last axis. The op also outputs the batch mean
    and variance, which its gradient reads."""
    c = x.shape[-1]
    y, _, _ = b.multi_op(
        "FusedBatchNormV3",
        name,
        (x, gamma, beta),
        (x.shape, (c,), (c,)),
        flops=elementwise_flops("FusedBatchNormV3", x.size),
    )
    return y


# ---------------------------------------------------------------------- reductions
def reduce(
    b: GraphBuilder,
    op_type: str,
    x: Tensor,
    axes: Sequence[int],
    *,
    keepdims: bool = False,
    name: str | None = None,
) -> Tensor:
    """``Sum``, ``Mean`` or ``Max`` over ``axes``; one FLOP per input element."""
    nd = len(x.shape)
    axes_set = {a % nd for a in axes}
    if keepdims:
        shape = tuple(1 if i in axes_set else s for i, s in enumerate(x.shape))
    else:
        shape = tuple(s for i, s in enumerate(x.shape) if i not in axes_set)
    return b.op(op_type, name or op_type, (x,), shape, flops=float(x.size))


# ---------------------------------------------------------------------- data movement
def reshape(
    b: GraphBuilder,
    x: Tensor,
    shape: Sequence[int],
    name: str = "Reshape",
    op_type: str = "Reshape",
) -> Tensor:
    """``Reshape`` (or ``ExpandDims``/``Squeeze``): same elements, new shape; a view that accesses
    no bytes (:data:`graphopt.workloads.builder.VIEW_TYPES`).

    Raises:
        ValueError: the element counts differ.
    """
    if math.prod(shape) != x.size:
        raise ValueError(f"{op_type} {name!r}: cannot reshape {x.shape} into {tuple(shape)}")
    return b.op(op_type, name, (x,), shape, grad_rule="Reshape")


def transpose(b: GraphBuilder, x: Tensor, perm: Sequence[int], name: str = "Transpose") -> Tensor:
    return b.op("Transpose", name, (x,), tuple(x.shape[p] for p in perm))


def concat(b: GraphBuilder, xs: Sequence[Tensor], axis: int, name: str = "ConcatV2") -> Tensor:
    """Concatenate along ``axis``."""
    axis %= len(xs[0].shape)
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return b.op("ConcatV2", name, xs, shape)


def split(
    b: GraphBuilder, x: Tensor, num: int, axis: int, name: str = "Split"
) -> tuple[Tensor, ...]:
    """Split into ``num`` equal parts along ``axis``."""
    axis %= len(x.shape)
    if x.shape[axis] % num:
        raise ValueError(f"Split {name!r}: axis {axis} of {x.shape} is not divisible by {num}")
    part = list(x.shape)
    part[axis] //= num
    return b.multi_op("Split", name, (x,), [part] * num)


def unpack(b: GraphBuilder, x: Tensor, axis: int, name: str = "Unpack") -> tuple[Tensor, ...]:
    """Unstack along ``axis`` (e.g. a ``[B, T, E]`` sequence into ``T`` tensors ``[B, E]``)."""
    axis %= len(x.shape)
    part = x.shape[:axis] + x.shape[axis + 1 :]
    return b.multi_op("Unpack", name, (x,), [part] * x.shape[axis])


def pack(b: GraphBuilder, xs: Sequence[Tensor], axis: int, name: str = "Pack") -> Tensor:
    """Stack same-shaped tensors along a new ``axis``."""
    shape = list(xs[0].shape)
    shape.insert(axis % (len(shape) + 1), len(xs))
    return b.op("Pack", name, xs, shape)


def slice_(
    b: GraphBuilder, x: Tensor, shape: Sequence[int], name: str = "Slice", op_type: str = "Slice"
) -> Tensor:
    """A contiguous block of ``x`` of the given ``shape`` (``Slice`` or ``StridedSlice``)."""
    if len(shape) != len(x.shape) or any(s > d for s, d in zip(shape, x.shape, strict=True)):
        raise ValueError(f"{op_type} {name!r}: cannot take a {tuple(shape)} block of {x.shape}")
    return b.op(op_type, name, (x,), shape)


def pad(b: GraphBuilder, x: Tensor, shape: Sequence[int], name: str = "Pad") -> Tensor:
    """Zero-pad ``x`` to ``shape``."""
    return b.op("Pad", name, (x,), shape)


def gather(b: GraphBuilder, table: Tensor, ids: Tensor, name: str = "GatherV2") -> Tensor:
    """Embedding lookup ``table[ids]``: reads only the gathered rows (and the ids)."""
    out_shape = (*ids.shape, *table.shape[1:])
    out_bytes = 4 * math.prod(out_shape)
    return b.op(
        "GatherV2", name, (table, ids), out_shape, bytes_accessed=2.0 * out_bytes + ids.nbytes
    )


def sparse_softmax_cross_entropy(
    b: GraphBuilder,
    logits: Tensor,
    labels: Tensor,
    name: str = "SparseSoftmaxCrossEntropyWithLogits",
) -> Tensor:
    """Per-example loss ``[B]`` of ``logits [B, V]`` against integer ``labels [B]``. Like
    TensorFlow's op it also outputs the gradient w.r.t. the logits (``[B, V]``), which the
    backward pass reads."""
    loss, _ = b.multi_op(
        "SparseSoftmaxCrossEntropyWithLogits",
        name,
        (logits, labels),
        (logits.shape[:-1], logits.shape),
        flops=elementwise_flops("SparseSoftmaxCrossEntropyWithLogits", logits.size),
    )
    return loss
