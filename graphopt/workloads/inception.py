"""Inception-v3 (Szegedy et al. 2016), one training step on ImageNet-sized images.

Layer shapes follow Szegedy et al. 2016, "Rethinking the Inception Architecture for Computer
Vision": Table 1 (the outline: 299x299x3 input, stem, 3x Inception-A at 35x35, grid reduction,
4x Inception-B at 17x17 with factorised 7x7 convolutions (Fig. 6), grid reduction, 2x Inception-C
at 8x8 with expanded filter banks (Fig. 7), 8x8 average pool, 1000-way softmax), Sec. 4 (the
auxiliary classifier on the last 17x17 grid), and Sec. 8 (batch size 32). Per-branch filter counts
are those of the authors' released model (TF-slim ``inception_v3``, which Table 1 summarises),
e.g. ``Mixed_5b``: 1x1/64 | 1x1/48 -> 5x5/64 | 1x1/64 -> 3x3/96 -> 3x3/96 | avg-pool -> 1x1/32.
Every convolution is ``Conv2D`` (no bias) + ``FusedBatchNormV3`` + ``Relu`` (BN scale and offset
trainable). 1001 classes (ImageNet plus background, as the released model). The forward pass is
about 5.7 G multiply-adds per image, the commonly cited cost of Inception-v3; the tests check it.
"""

from __future__ import annotations

from graphopt.graph import CompGraph
from graphopt.workloads import layers, ops
from graphopt.workloads._checks import check_positive
from graphopt.workloads.backward import add_backward
from graphopt.workloads.builder import GraphBuilder, Tensor

BATCH = 32
IMAGE = 299
CLASSES = 1001

Branch = list[tuple[int, int | tuple[int, int]]]
"""A branch: ``(filters, kernel)`` convolutions applied in sequence."""


def inception_v3(
    *,
    batch: int = BATCH,
    image_size: int = IMAGE,
    num_classes: int = CLASSES,
    aux_logits: bool = True,
    optimizer: str = "sgd",
    name: str = "inception-v3",
) -> CompGraph:
    """Build the training step of Inception-v3.

    Args:
        batch: images per step.
        image_size: input height and width (299 in the paper; >= 75 keeps every grid non-empty).
        num_classes: output classes.
        aux_logits: include the auxiliary classifier (as in training).
        optimizer: see :data:`graphopt.workloads.backward.OPTIMIZERS`.
        name: graph name.

    Raises:
        ValueError: a non-positive size or an image smaller than 75.
    """
    check_positive(batch=batch, image_size=image_size, num_classes=num_classes)
    if image_size < 75:
        raise ValueError(f"image_size must be >= 75 for Inception-v3, got {image_size}")
    b = GraphBuilder(name)
    with b.scope("input", layer="input"):
        x = ops.placeholder(b, (batch, image_size, image_size, 3), "images")
        labels = ops.placeholder(b, (batch,), "labels")
    with b.scope("InceptionV3", layer="InceptionV3/stem"):
        x = _conv(b, x, 32, 3, "Conv2d_1a_3x3", stride=2, padding="VALID")
        x = _conv(b, x, 32, 3, "Conv2d_2a_3x3", padding="VALID")
        x = _conv(b, x, 64, 3, "Conv2d_2b_3x3")
        x = ops.pool(b, "MaxPool", x, ksize=3, stride=2, padding="VALID", name="MaxPool_3a_3x3")
        x = _conv(b, x, 80, 1, "Conv2d_3b_1x1", padding="VALID")
        x = _conv(b, x, 192, 3, "Conv2d_4a_3x3", padding="VALID")
        x = ops.pool(b, "MaxPool", x, ksize=3, stride=2, padding="VALID", name="MaxPool_5a_3x3")
        for block, pool_filters in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
            x = _mixed(
                b,
                x,
                block,
                [
                    [(64, 1)],
                    [(48, 1), (64, 5)],
                    [(64, 1), (96, 3), (96, 3)],
                ],
                pool_filters,
            )
        x = _reduction(b, x, "Mixed_6a", [[(384, 3)], [(64, 1), (96, 3), (96, 3)]])
        for block, c7 in (
            ("Mixed_6b", 128),
            ("Mixed_6c", 160),
            ("Mixed_6d", 160),
            ("Mixed_6e", 192),
        ):
            x = _mixed(
                b,
                x,
                block,
                [
                    [(192, 1)],
                    [(c7, 1), (c7, (1, 7)), (192, (7, 1))],
                    [(c7, 1), (c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))],
                ],
                192,
            )
        aux = _aux_head(b, x, num_classes, labels) if aux_logits else None
        x = _reduction(
            b,
            x,
            "Mixed_7a",
            [[(192, 1), (320, 3)], [(192, 1), (192, (1, 7)), (192, (7, 1)), (192, 3)]],
        )
        for block in ("Mixed_7b", "Mixed_7c"):
            x = _mixed_7(b, x, block)
        with b.scope("Logits", layer="InceptionV3/Logits", colocation="InceptionV3/Logits"):
            x = ops.reduce(b, "Mean", x, (1, 2), name="AvgPool_1a")
            logits = layers.dense(b, x, num_classes, scope="Conv2d_1c_1x1")
            loss = ops.sparse_softmax_cross_entropy(b, logits, labels)
    total = layers.mean_loss(b, [loss] if aux is None else [loss, aux])
    add_backward(b, total, optimizer=optimizer)
    config = {
        "batch": batch,
        "image_size": image_size,
        "num_classes": num_classes,
        "aux_logits": aux_logits,
        "optimizer": optimizer,
    }
    return b.build({"family": "inception", "config": config})


def _conv(
    b: GraphBuilder,
    x: Tensor,
    filters: int,
    kernel: int | tuple[int, int],
    scope: str,
    stride: int = 1,
    padding: str = "SAME",
) -> Tensor:
    return layers.conv_bn(b, x, filters, kernel, scope=scope, stride=stride, padding=padding)


def _branches(
    b: GraphBuilder, x: Tensor, branches: list[Branch], stride_last: bool
) -> list[Tensor]:
    outs = []
    for k, branch in enumerate(branches):
        with b.scope(f"Branch_{k}"):
            y = x
            for j, (filters, kernel) in enumerate(branch):
                last = stride_last and j == len(branch) - 1
                y = _conv(
                    b,
                    y,
                    filters,
                    kernel,
                    f"Conv2d_{j}",
                    stride=2 if last else 1,
                    padding="VALID" if last else "SAME",
                )
            outs.append(y)
    return outs


def _mixed(
    b: GraphBuilder, x: Tensor, block: str, branches: list[Branch], pool_filters: int
) -> Tensor:
    """Inception-A/B module: conv branches plus average pool -> 1x1, concatenated."""
    with b.scope(block, layer=f"InceptionV3/{block}"):
        outs = _branches(b, x, branches, stride_last=False)
        with b.scope(f"Branch_{len(branches)}"):
            p = ops.pool(b, "AvgPool", x, ksize=3, stride=1, name="AvgPool_0a_3x3")
            outs.append(_conv(b, p, pool_filters, 1, "Conv2d_0b_1x1"))
        return ops.concat(b, outs, axis=3)


def _reduction(b: GraphBuilder, x: Tensor, block: str, branches: list[Branch]) -> Tensor:
    """Grid reduction (Fig. 10): strided conv branches plus a strided max pool."""
    with b.scope(block, layer=f"InceptionV3/{block}"):
        outs = _branches(b, x, branches, stride_last=True)
        with b.scope(f"Branch_{len(branches)}"):
            outs.append(
                ops.pool(b, "MaxPool", x, ksize=3, stride=2, padding="VALID", name="MaxPool_1a_3x3")
            )
        return ops.concat(b, outs, axis=3)


def _mixed_7(b: GraphBuilder, x: Tensor, block: str) -> Tensor:
    """Inception-C module (Fig. 7): 1x3 and 3x1 convolutions in parallel on two branches."""
    with b.scope(block, layer=f"InceptionV3/{block}"):
        with b.scope("Branch_0"):
            b0 = _conv(b, x, 320, 1, "Conv2d_0a_1x1")
        with b.scope("Branch_1"):
            y = _conv(b, x, 384, 1, "Conv2d_0a_1x1")
            b1 = ops.concat(
                b,
                (
                    _conv(b, y, 384, (1, 3), "Conv2d_0b_1x3"),
                    _conv(b, y, 384, (3, 1), "Conv2d_0b_3x1"),
                ),
                axis=3,
            )
        with b.scope("Branch_2"):
            y = _conv(b, _conv(b, x, 448, 1, "Conv2d_0a_1x1"), 384, 3, "Conv2d_0b_3x3")
            b2 = ops.concat(
                b,
                (
                    _conv(b, y, 384, (1, 3), "Conv2d_0c_1x3"),
                    _conv(b, y, 384, (3, 1), "Conv2d_0d_3x1"),
                ),
                axis=3,
            )
        with b.scope("Branch_3"):
            p = ops.pool(b, "AvgPool", x, ksize=3, stride=1, name="AvgPool_0a_3x3")
            b3 = _conv(b, p, 192, 1, "Conv2d_0b_1x1")
        return ops.concat(b, (b0, b1, b2, b3), axis=3)


def _aux_head(b: GraphBuilder, x: Tensor, num_classes: int, labels: Tensor) -> Tensor:
    """Auxiliary classifier on the 17x17 grid (Sec. 4): 5x5/3 average pool, 1x1/128, 5x5/768,
    a 1x1 classifier; its loss is added to the main loss."""
    with b.scope("AuxLogits", layer="InceptionV3/AuxLogits"):
        y = ops.pool(b, "AvgPool", x, ksize=5, stride=3, padding="VALID", name="AvgPool_1a_5x5")
        y = _conv(b, y, 128, 1, "Conv2d_1b_1x1")
        y = _conv(b, y, 768, y.shape[1], "Conv2d_2a", padding="VALID")
        y = ops.reshape(b, y, (y.shape[0], y.shape[-1]), name="Squeeze", op_type="Squeeze")
        logits = layers.dense(b, y, num_classes, scope="Conv2d_2b_1x1")
        return ops.sparse_softmax_cross_entropy(b, logits, labels)
