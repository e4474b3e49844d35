"""Layers built from :mod:`~graphopt.workloads.ops` primitives, with their weights.

Each layer records its weights as variables under ``scope`` and returns its output tensor. The op
decomposition follows what TensorFlow 1.x emits for the same layer (``tf.layers.dense``,
``slim.conv2d`` with batch norm, ``tf.contrib.layers.layer_norm``...), without the shape-only
bookkeeping ops (``Shape``, ``BroadcastGradientArgs``), which cost nothing.

Parameters per layer (the sum of the graph's ``param_bytes`` is 4 bytes times these counts):

===================  ===========================================================
:func:`dense`        ``d_in * units`` (+ ``units`` bias)
:func:`conv_bn`      ``kh * kw * c_in * filters`` + ``2 * filters`` (BN scale and offset)
:func:`layer_norm`   ``2 * d`` (scale and offset)
:func:`embedding`    ``vocab * dim``
===================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Sequence

from graphopt.workloads import ops
from graphopt.workloads.builder import GraphBuilder, Tensor


def dense(
    b: GraphBuilder,
    x: Tensor,
    units: int,
    *,
    scope: str = "dense",
    use_bias: bool = True,
    activation: str | None = None,
) -> Tensor:
    """Fully connected layer ``act(x W + b)`` on the last axis of ``x``.

    A rank > 2 input is flattened to ``[-1, d_in]`` and back, as ``tf.tensordot`` does.

    Shapes:
        ``x: [..., d_in]`` -> ``[..., units]``.
    """
    with b.scope(scope):
        kernel = b.variable("kernel", (x.shape[-1], units))
        bias = b.variable("bias", (units,)) if use_bias else None
        return linear(b, x, kernel, bias, activation=activation)


def linear(
    b: GraphBuilder,
    x: Tensor,
    kernel: Tensor,
    bias: Tensor | None = None,
    *,
    activation: str | None = None,
) -> Tensor:
    """``act(x kernel + bias)`` with existing weights (``MatMul``, ``BiasAdd``, activation; a
    rank > 2 input is flattened by a ``Reshape`` and restored by another).

    Shapes:
        ``x: [..., d_in]``, ``kernel: [d_in, units]`` -> ``[..., units]``.
    """
    d_in, units = kernel.shape
    flat = x if len(x.shape) == 2 else ops.reshape(b, x, (x.size // d_in, d_in))
    y = ops.matmul(b, flat, kernel)
    if bias is not None:
        y = ops.bias_add(b, y, bias)
    if activation is not None:
        y = ops.unary(b, activation, y)
    if len(x.shape) != 2:
        y = ops.reshape(b, y, (*x.shape[:-1], units))
    return y


def conv_bn(
    b: GraphBuilder,
    x: Tensor,
    filters: int,
    kernel: int | tuple[int, int],
    *,
    scope: str,
    stride: int | tuple[int, int] = 1,
    padding: str = "SAME",
    relu: bool = True,
    pre_relu: bool = False,
    dilation: int = 1,
) -> Tensor:
    """Convolution (no bias) + ``FusedBatchNormV3`` (+ ``Relu``), as ``slim.conv2d`` with batch
    norm. ``pre_relu`` puts the ``Relu`` before the convolution (NASNet/AmoebaNet order). The
    layer's ops, weights and gradients form one colocation group named after the scope.

    Shapes:
        ``x: [B, H, W, C]`` -> ``[B, H', W', filters]``.
    """
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    with b.scope(scope, colocation=b.full_name(scope)):
        if pre_relu:
            x = ops.unary(b, "Relu", x)
        w = b.variable("weights", (kh, kw, x.shape[-1], filters))
        y = ops.conv2d(b, x, w, stride=stride, padding=padding, dilation=dilation)
        y = batch_norm(b, y)
        if relu and not pre_relu:
            y = ops.unary(b, "Relu", y)
        return y


def batch_norm(b: GraphBuilder, x: Tensor, scope: str = "BatchNorm") -> Tensor:
    """``FusedBatchNormV3`` with trainable scale (gamma) and offset (beta) over the last axis."""
    with b.scope(scope):
        c = x.shape[-1]
        gamma = b.variable("gamma", (c,))
        beta = b.variable("beta", (c,))
        return ops.fused_batch_norm(b, x, gamma, beta)


def layer_norm(
    b: GraphBuilder,
    x: Tensor,
    scope: str = "LayerNorm",
    params: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Layer normalisation over the last axis, decomposed as TensorFlow 1.x does
    (``tf.nn.moments`` then ``tf.nn.batch_normalization``): ``Mean``, ``StopGradient``,
    ``SquaredDifference``, ``Mean``, ``AddV2`` (epsilon), ``Rsqrt``, ``Mul`` (scale), ``Mul``,
    ``Mul``, ``Sub``, ``AddV2``.

    ``params`` gives existing ``(gamma, beta)`` weights; by default they are created.

    Shapes:
        ``x: [..., d]`` -> ``[..., d]``.
    """
    with b.scope(scope):
        if params is None:
            gamma, beta = layer_norm_weights(b, x.shape[-1])
        else:
            gamma, beta = params
        mean = ops.reduce(b, "Mean", x, (-1,), keepdims=True, name="moments/mean")
        fixed = b.op(
            "StopGradient", "moments/StopGradient", (mean,), mean.shape, differentiable=False
        )
        sq = ops.binary(b, "SquaredDifference", x, fixed, name="moments/SquaredDifference")
        var = ops.reduce(b, "Mean", sq, (-1,), keepdims=True, name="moments/variance")
        var_eps = b.op("AddV2", "batchnorm/add", (var,), var.shape, flops=float(var.size))
        inv = ops.unary(b, "Rsqrt", var_eps, name="batchnorm/Rsqrt")
        inv = ops.binary(b, "Mul", inv, gamma, name="batchnorm/mul")
        scaled = ops.binary(b, "Mul", x, inv, name="batchnorm/mul_1")
        shift = ops.binary(b, "Mul", mean, inv, name="batchnorm/mul_2")
        offset = ops.binary(b, "Sub", beta, shift, name="batchnorm/sub")
        return ops.binary(b, "AddV2", scaled, offset, name="batchnorm/add_1")


def layer_norm_weights(b: GraphBuilder, d: int) -> tuple[Tensor, Tensor]:
    """Create layer-norm ``gamma`` and ``beta`` of size ``d`` under the current scope."""
    return b.variable("gamma", (d,)), b.variable("beta", (d,))


def embedding(b: GraphBuilder, ids: Tensor, vocab: int, dim: int) -> Tensor:
    """Embedding lookup (``GatherV2``) of integer ``ids`` in a ``[vocab, dim]`` table (variable
    ``embedding`` under the current scope); its gradient is sparse (only the looked-up rows are
    updated).

    Shapes:
        ``ids: [...]`` -> ``[..., dim]``.
    """
    table = b.variable("embedding", (vocab, dim))
    return ops.gather(b, table, ids)


def softmax_loss(
    b: GraphBuilder, h: Tensor, labels: Tensor, weights: Tensor, bias: Tensor, *, scope: str
) -> Tensor:
    """Output projection and per-example cross-entropy: ``MatMul``, ``BiasAdd``,
    ``SparseSoftmaxCrossEntropyWithLogits`` (shared ``weights``/``bias`` across calls).

    The ops form one colocation group named after the scope.

    Shapes:
        ``h: [B, d]``, ``labels: [B]`` -> per-example loss ``[B]``.
    """
    with b.scope(scope, colocation=b.full_name(scope)):
        logits = ops.bias_add(b, ops.matmul(b, h, weights), bias)
        return ops.sparse_softmax_cross_entropy(b, logits, labels)


def mean_loss(b: GraphBuilder, losses: Sequence[Tensor], *, scope: str = "loss") -> Tensor:
    """Sum per-step losses (``AddN``) and average them over the batch (``Mean``) to a scalar."""
    with b.scope(scope, layer=scope):
        total = ops.add_n(b, losses)
        return ops.reduce(b, "Mean", total, tuple(range(len(total.shape))))
