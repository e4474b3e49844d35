"""AmoebaNet-A (Real et al. 2019), one training step on ImageNet-sized images.

Real et al. 2019, "Regularized Evolution for Image Classifier Architecture Search": the evolved
normal and reduction cells of AmoebaNet-A are stacked in the NASNet ImageNet skeleton (Zoph et
al. 2018, Fig. 2): a 3x3/2 stem convolution, two reduction "stem" cells at ``F/4`` and ``F/2``
filters, then ``N`` normal cells, a reduction cell (filters doubled), ``N`` normal cells, a
reduction cell, ``N`` normal cells, ReLU, global average pool and a 1001-way classifier, with an
auxiliary head after the last normal cell before the second reduction.

Shapes: ``N = 6``, ``F = 190``, 331x331 images, the ImageNet model that Real et al. 2019 report
with 86.7M parameters and 23.1B multiply-adds; batch 16 is our choice. With the cell
specifications below this graph has 111.8M parameters and 29.6B multiply-adds per image (without
the auxiliary head), about 29% more. The same skeleton reproduces NASNet-A Large's published
88.9M / 23.8B (Zoph et al. 2018, ImageNet results) to 0.2% (a test checks it), so the difference
lies in the cell specifications or in the reported ``F`` (``F = 168`` gives 88.1M / 23.3B).

The cell specifications are those of the authors' TensorFlow release (``tensorflow/tpu``,
``models/official/amoeba_net/model_specs.py``), transcribed without access to the file here, in
NASNet's encoding: block ``i`` applies ``operations[2i]`` to ``states[indices[2i]]`` and
``operations[2i+1]`` to ``states[indices[2i+1]]`` and adds them; ``states[0]`` is the
(1x1-projected) previous cell output, ``states[1]`` the one before it; the cell output
concatenates the states not marked in ``used``.

Op decompositions (NASNet ``nasnet_utils``): ``separable_kxk_2`` = 2 x (``Relu``,
``DepthwiseConv2dNative``, ``Conv2D`` 1x1, ``FusedBatchNormV3``), the first one strided;
``1x7_7x1`` = ``Relu``, 1x7 conv, BN, ``Relu``, 7x1 conv, BN; pools are 3x3 ``SAME``; stride 2 is
applied to operations on the cell inputs of reduction cells; a previous output with a larger grid
goes through a factorised reduction (two shifted 1x1/2 ``AvgPool`` + 1x1 conv paths, ``ConcatV2``,
BN). Drop-path is not modelled.
"""

from __future__ import annotations

from graphopt.graph import CompGraph
from graphopt.workloads import layers, ops
from graphopt.workloads._checks import check_positive
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder, Tensor

NUM_CELLS = 6
FILTERS = 190
IMAGE = 331
BATCH = 16
CLASSES = 1001
STEM_FILTERS = 96  # NASNet ImageNet stem: 32 * stem_multiplier 3

NORMAL_CELL = {
    "operations": [
        "avg_pool_3x3",
        "max_pool_3x3",
        "separable_3x3_2",
        "none",
        "none",
        "avg_pool_3x3",
        "separable_3x3_2",
        "separable_5x5_2",
        "avg_pool_3x3",
        "separable_3x3_2",
    ],
    "indices": [0, 0, 1, 1, 0, 1, 0, 2, 5, 0],
    "used": [1, 0, 0, 0, 0, 0, 0],
}
REDUCTION_CELL = {
    "operations": [
        "separable_3x3_2",
        "avg_pool_3x3",
        "max_pool_3x3",
        "separable_7x7_2",
        "max_pool_3x3",
        "max_pool_3x3",
        "separable_3x3_2",
        "1x7_7x1",
        "avg_pool_3x3",
        "separable_7x7_2",
    ],
    "indices": [0, 1, 0, 1, 0, 1, 3, 2, 2, 0],
    "used": [1, 1, 1, 0, 0, 0, 0],
}


def amoebanet(
    *,
    num_cells: int = NUM_CELLS,
    filters: int = FILTERS,
    batch: int = BATCH,
    image_size: int = IMAGE,
    num_classes: int = CLASSES,
    normal_cell: dict | None = None,
    reduction_cell: dict | None = None,
    optimizer: str = "sgd",
    name: str = "amoebanet",
) -> CompGraph:
    """Build the training step of AmoebaNet-A (``N = num_cells``, ``F = filters``).

    Args:
        num_cells: normal cells per stack (``N``).
        filters: filters of the first stack's cells (``F``), doubled at each reduction.
        batch: images per step.
        image_size: input height and width (>= 32).
        num_classes: output classes.
        normal_cell: cell specification (keys ``operations``, ``indices``, ``used``), default
            :data:`NORMAL_CELL`; ``reduction_cell`` likewise (default :data:`REDUCTION_CELL`).
            Other NASNet-space cells (NASNet-A, PNASNet) plug in here.
        optimizer: see :data:`graphopt.workloads.backward.OPTIMIZERS`.
        name: graph name.

    Raises:
        ValueError: a non-positive size, ``filters < 4`` or an image smaller than 32.
    """
    check_positive(
        num_cells=num_cells,
        filters=filters,
        batch=batch,
        image_size=image_size,
        num_classes=num_classes,
    )
    if filters < 4 or image_size < 32:
        raise ValueError(f"need filters >= 4 and image_size >= 32, got {filters} and {image_size}")
    normal = NORMAL_CELL if normal_cell is None else normal_cell
    reduction = REDUCTION_CELL if reduction_cell is None else reduction_cell
    b = GraphBuilder(name)
    with b.scope("input", layer="input"):
        x = ops.placeholder(b, (batch, image_size, image_size, 3), "images")
        labels = ops.placeholder(b, (batch,), "labels")
    with b.scope("stem", layer="stem"):
        x = layers.conv_bn(
            b, x, STEM_FILTERS, 3, scope="conv0", stride=2, padding="VALID", relu=False
        )
    outputs: list[Tensor | None] = [None, x]

    def add_cell(spec: dict, scaling: float, stride: int, scope: str) -> None:
        """Append a cell of ``spec`` on the last two outputs, ``filters * scaling`` wide."""
        outputs.append(
            _cell(
                b,
                spec,
                outputs[-1],
                outputs[-2],
                int(filters * scaling),
                stride=stride,
                scope=scope,
            )
        )

    for k in range(2):
        add_cell(reduction, 0.25 * 2**k, 2, f"stem_cell_{k}")
    scaling = 1.0
    reductions = (num_cells, 2 * num_cells)
    aux = None
    for k in range(3 * num_cells):
        if k in reductions:
            scaling *= 2
            add_cell(reduction, scaling, 2, f"reduction_cell_{reductions.index(k)}")
        add_cell(normal, scaling, 1, f"cell_{k}")
        if k == 2 * num_cells - 1:
            last = outputs[-1]
            assert last is not None
            aux = _aux_head(b, last, num_classes, labels)
    with b.scope("final_layer", layer="final_layer", colocation="final_layer"):
        top = outputs[-1]
        assert top is not None
        h = ops.reduce(b, "Mean", ops.unary(b, "Relu", top), (1, 2), name="global_pool")
        logits = layers.dense(b, h, num_classes, scope="FC")
        loss = ops.sparse_softmax_cross_entropy(b, logits, labels)
    total = layers.mean_loss(b, [loss] if aux is None else [loss, aux])
    add_backward(b, total, optimizer=optimizer)
    config = {
        "num_cells": num_cells,
        "filters": filters,
        "batch": batch,
        "image_size": image_size,
        "num_classes": num_classes,
        "optimizer": optimizer,
    }
    return b.build({"family": "amoebanet", "config": config})


def _cell(
    b: GraphBuilder,
    spec: dict,
    net: Tensor | None,
    prev: Tensor | None,
    filters: int,
    *,
    stride: int,
    scope: str,
) -> Tensor:
    """One NASNet-style cell (see the module docstring)."""
    assert net is not None
    with b.scope(scope, layer=scope):
        prev = net if prev is None else _reduce_prev_layer(b, prev, net, filters)
        cur = layers.conv_bn(b, net, filters, 1, scope="beginning", pre_relu=True)
        states = [cur, prev]
        ops_, idx = spec["operations"], spec["indices"]
        for i in range(5):
            with b.scope(f"comb_iter_{i}"):
                parts = []
                for side in range(2):
                    j = idx[2 * i + side]
                    s = stride if j < 2 else 1
                    with b.scope("left" if side == 0 else "right"):
                        parts.append(_operation(b, ops_[2 * i + side], states[j], filters, s))
                states.append(ops.binary(b, "AddV2", parts[0], parts[1], name="combine"))
        kept = [st for st, used in zip(states, spec["used"], strict=True) if not used]
        size = min(st.shape[1] for st in kept)
        kept = [
            _factorized_reduction(b, st, filters, scope="reduce_state")
            if st.shape[1] > size
            else st
            for st in kept
        ]
        return ops.concat(b, kept, axis=3, name="cell_output")


def _operation(b: GraphBuilder, op: str, x: Tensor, filters: int, stride: int) -> Tensor:
    if op == "none":
        return x if stride == 1 else _factorized_reduction(b, x, filters, scope="none")
    if op in ("avg_pool_3x3", "max_pool_3x3"):
        kind = "AvgPool" if op.startswith("avg") else "MaxPool"
        y = ops.pool(b, kind, x, ksize=3, stride=stride)
        if y.shape[-1] != filters:
            y = layers.conv_bn(b, y, filters, 1, scope="pool_1x1", relu=False)
        return y
    if op.startswith("separable_"):
        k = int(op.split("_")[1].split("x")[0])
        for i in range(2):
            with b.scope(f"separable_{k}x{k}_{i + 1}"):
                x = ops.unary(b, "Relu", x)
                dw = b.variable("depthwise_weights", (k, k, x.shape[-1], 1))
                x = ops.depthwise_conv2d(b, x, dw, stride=stride if i == 0 else 1)
                pw = b.variable("pointwise_weights", (1, 1, x.shape[-1], filters))
                x = layers.batch_norm(b, ops.conv2d(b, x, pw, name="pointwise"))
        return x
    if op == "1x7_7x1":
        x = layers.conv_bn(b, x, filters, (1, 7), scope="1x7", stride=(1, stride), pre_relu=True)
        return layers.conv_bn(b, x, filters, (7, 1), scope="7x1", stride=(stride, 1), pre_relu=True)
    raise ValueError(
        f"unknown cell operation {op!r}; choose one of: none, avg_pool_3x3, max_pool_3x3, "
        "separable_3x3_2, separable_5x5_2, separable_7x7_2, 1x7_7x1"
    )


def _reduce_prev_layer(b: GraphBuilder, prev: Tensor, cur: Tensor, filters: int) -> Tensor:
    """Bring the cell before the previous one to the current grid and width."""
    if prev.shape[1] != cur.shape[1]:
        return _factorized_reduction(b, ops.unary(b, "Relu", prev), filters, scope="prev_reduction")
    if prev.shape[-1] != filters:
        return layers.conv_bn(b, prev, filters, 1, scope="prev_1x1", pre_relu=True)
    return prev


def _factorized_reduction(b: GraphBuilder, x: Tensor, filters: int, *, scope: str) -> Tensor:
    """Halve the grid without losing information: two 1x1/2 paths, one shifted by a pixel."""
    with b.scope(scope):
        half = filters // 2
        p1 = ops.pool(b, "AvgPool", x, ksize=1, stride=2, padding="VALID", name="path1/AvgPool")
        p1 = ops.conv2d(
            b, p1, b.variable("path1/weights", (1, 1, x.shape[-1], half)), name="path1/Conv2D"
        )
        shifted = ops.slice_(
            b,
            ops.pad(
                b, x, (x.shape[0], x.shape[1] + 1, x.shape[2] + 1, x.shape[3]), name="path2/Pad"
            ),
            x.shape,
            name="path2/StridedSlice",
            op_type="StridedSlice",
        )
        p2 = ops.pool(
            b, "AvgPool", shifted, ksize=1, stride=2, padding="VALID", name="path2/AvgPool"
        )
        p2 = ops.conv2d(
            b,
            p2,
            b.variable("path2/weights", (1, 1, x.shape[-1], filters - half)),
            name="path2/Conv2D",
        )
        return layers.batch_norm(b, ops.concat(b, (p1, p2), axis=3))


def _aux_head(b: GraphBuilder, x: Tensor, num_classes: int, labels: Tensor) -> Tensor:
    """NASNet's auxiliary classifier: ReLU, 5x5/3 average pool, 1x1/128 conv, a conv over the
    whole remaining grid to 768, a classifier."""
    with b.scope("aux_logits", layer="aux_logits"):
        y = ops.pool(b, "AvgPool", ops.unary(b, "Relu", x), ksize=5, stride=3, padding="VALID")
        y = layers.conv_bn(b, y, 128, 1, scope="proj")
        y = layers.conv_bn(b, y, 768, y.shape[1], scope="aux_conv", padding="VALID")
        y = ops.reshape(b, y, (y.shape[0], y.shape[-1]), name="flatten")
        logits = layers.dense(b, y, num_classes, scope="FC")
        return ops.sparse_softmax_cross_entropy(b, logits, labels)
