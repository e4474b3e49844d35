"""WaveNet (van den Oord et al. 2016), one training step on raw audio.

GO (Zhou et al. 2020, experiments) places WaveNets of 2 and 4 stacks of dilated layers.

Architecture (van den Oord et al. 2016): causal convolutions of width 2 with dilations doubling
``1, 2, ..., 512`` and repeated per stack (Sec. 2.1),
gated activation ``tanh(W_f * x) * sigmoid(W_g * x)`` (Sec. 2.3, Eq. 2), residual and
parameterised skip connections (Sec. 2.4, Fig. 4), 256-way softmax over mu-law quantised samples
(Sec. 2.2). The paper does not give channel counts or the training crop; we use the defaults of
the widely used TensorFlow implementation (``ibab/tensorflow-wavenet``, ``wavenet_params.json`` and
``train.py``):

=======================  ========
residual channels        32
dilation (gate) channels 32
skip channels            512
quantisation channels    256 (one-hot input, softmax output)
batch                    1
output samples           100,000 (the receptive field is added to the input crop)
=======================  ========

Graph: ``OneHot`` input, an initial causal ``Conv2D`` (256 -> 32, width 2), then per dilated layer
14 ops: two dilated ``Conv2D`` (filter and gate) with ``BiasAdd``, ``Tanh``, ``Sigmoid``, ``Mul``;
a 1x1 ``Conv2D`` + ``BiasAdd`` (dense), ``Slice`` of the input + ``AddV2`` (residual connection);
``Slice`` of the last ``samples`` steps + 1x1 ``Conv2D`` + ``BiasAdd`` (skip). The last layer has no
residual branch (nothing reads it; TensorFlow prunes it). The skips are summed by a chain of
``AddV2`` (as Python's ``sum`` does), then ``Relu``, 1x1 conv 512 -> 512, ``Relu``, 1x1 conv
512 -> 256, softmax cross-entropy against the next samples. Convolutions are NHWC with height 1
and ``VALID`` padding, so every layer shortens the sequence by its dilation.
"""

from __future__ import annotations

from graphopt.graph import CompGraph
from graphopt.workloads import layers, ops
from graphopt.workloads._checks import check_positive
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder, Tensor

LAYERS_PER_STACK = 10  # dilations 1 .. 512
RESIDUAL_CHANNELS = 32
DILATION_CHANNELS = 32
SKIP_CHANNELS = 512
QUANTIZATION = 256
BATCH = 1
SAMPLES = 100_000
FILTER_WIDTH = 2


def wavenet(
    num_stacks: int,
    *,
    layers_per_stack: int = LAYERS_PER_STACK,
    residual_channels: int = RESIDUAL_CHANNELS,
    dilation_channels: int = DILATION_CHANNELS,
    skip_channels: int = SKIP_CHANNELS,
    quantization: int = QUANTIZATION,
    batch: int = BATCH,
    samples: int = SAMPLES,
    optimizer: str = "sgd",
    name: str | None = None,
) -> CompGraph:
    """Build the training step of a WaveNet with ``num_stacks`` stacks of dilated layers.

    Args:
        num_stacks: repetitions of the dilation pattern (GO: 2 and 4).
        layers_per_stack: dilated layers per stack, dilations ``1, 2, ..., 2**(layers - 1)``.
        residual_channels, dilation_channels, skip_channels: channel counts (see the table).
        quantization: amplitude classes (input one-hot width and softmax size).
        batch: audio crops per step.
        samples: predicted samples per crop (the input crop adds the receptive field).
        optimizer: see :data:`graphopt.workloads.backward.OPTIMIZERS`.
        name: graph name (default ``wavenet-<num_stacks>``).

    Raises:
        ValueError: a non-positive size.
    """
    check_positive(
        num_stacks=num_stacks,
        layers_per_stack=layers_per_stack,
        residual_channels=residual_channels,
        dilation_channels=dilation_channels,
        skip_channels=skip_channels,
        quantization=quantization,
        batch=batch,
        samples=samples,
    )
    dilations = [2**i for i in range(layers_per_stack)] * num_stacks
    receptive_field = (FILTER_WIDTH - 1) * sum(dilations) + FILTER_WIDTH
    width = samples + receptive_field - 1
    b = GraphBuilder(name or f"wavenet-{num_stacks}")
    with b.scope("input", layer="input"):
        ids = ops.placeholder(b, (batch, 1, width), "audio")
        labels = ops.placeholder(b, (batch * samples,), "targets")
        x = b.op("OneHot", "one_hot", (ids,), (batch, 1, width, quantization), differentiable=False)
    with b.scope("causal_layer", layer="causal_layer", colocation="causal_layer"):
        w = b.variable("filter", (1, FILTER_WIDTH, quantization, residual_channels))
        x = ops.conv2d(b, x, w, padding="VALID")
    skips = []
    for i, dilation in enumerate(dilations):
        scope = f"dilated_stack/layer{i}"
        with b.scope(scope, layer=scope, colocation=scope):
            last = i == len(dilations) - 1
            skip, x = _dilated_layer(
                b, x, dilation, samples, dilation_channels, skip_channels, residual=not last
            )
            skips.append(skip)
    with b.scope("postprocessing", layer="postprocessing", colocation="postprocessing"):
        total = skips[0]
        for k, skip in enumerate(skips[1:]):
            total = ops.binary(b, "AddV2", total, skip, name=f"skip_sum_{k}")
        h = _conv1x1(b, ops.unary(b, "Relu", total), skip_channels, "postprocess1")
        h = _conv1x1(b, ops.unary(b, "Relu", h), quantization, "postprocess2")
        logits = ops.reshape(b, h, (batch * samples, quantization))
        loss = ops.sparse_softmax_cross_entropy(b, logits, labels)
    total_loss = layers.mean_loss(b, [loss])
    add_backward(b, total_loss, optimizer=optimizer)
    config = {
        "num_stacks": num_stacks,
        "layers_per_stack": layers_per_stack,
        "residual_channels": residual_channels,
        "dilation_channels": dilation_channels,
        "skip_channels": skip_channels,
        "quantization": quantization,
        "batch": batch,
        "samples": samples,
        "receptive_field": receptive_field,
        "optimizer": optimizer,
    }
    return b.build({"family": "wavenet", "config": config})


def _conv1x1(b: GraphBuilder, x: Tensor, channels: int, scope: str) -> Tensor:
    """A 1x1 ``Conv2D`` with bias."""
    with b.scope(scope):
        w = b.variable("weights", (1, 1, x.shape[-1], channels))
        return ops.bias_add(b, ops.conv2d(b, x, w), b.variable("bias", (channels,)))


def _dilated_layer(
    b: GraphBuilder,
    x: Tensor,
    dilation: int,
    samples: int,
    dilation_channels: int,
    skip_channels: int,
    *,
    residual: bool = True,
) -> tuple[Tensor, Tensor]:
    """Gated dilated causal layer; returns ``(skip contribution, residual output)``. Without
    ``residual`` (the last layer, whose residual output nothing reads and TensorFlow prunes) the
    residual branch is left out and the input is returned in its place."""
    gates = []
    for part in ("filter", "gate"):
        with b.scope(part):
            w = b.variable("weights", (1, FILTER_WIDTH, x.shape[-1], dilation_channels))
            y = ops.conv2d(b, x, w, padding="VALID", dilation=dilation)
            gates.append(ops.bias_add(b, y, b.variable("bias", (dilation_channels,))))
    out = ops.binary(b, "Mul", ops.unary(b, "Tanh", gates[0]), ops.unary(b, "Sigmoid", gates[1]))
    bs, _, t, c = out.shape
    skip = _conv1x1(
        b, ops.slice_(b, out, (bs, 1, samples, c), name="skip_cut"), skip_channels, "skip"
    )
    if not residual:
        return skip, x
    transformed = _conv1x1(b, out, x.shape[-1], "dense")
    cut = ops.slice_(b, x, transformed.shape, name="input_cut")
    return skip, ops.binary(b, "AddV2", cut, transformed, name="residual")
