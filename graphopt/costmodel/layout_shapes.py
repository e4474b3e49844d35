"""Shape-aware features of TpuGraphs layout configurations: what a layout costs in TPU tile padding.

A layout configuration (:class:`~graphopt.costmodel.tpugraphs.LayoutGraph`) fixes, for each
configurable node, the ``minor_to_major`` order of its output and of its first two operands (XLA
calls them input and kernel). How fast a layout is depends on the tensor's shape: a TPU stores a
tensor in ``(8, 128)`` tiles over its two minor-most dimensions, so the minor-most dimension is
rounded up to a multiple of 128 and the second-minor one to a multiple of 8. A ``(32, 54, 54, 64)``
convolution output with the batch dimension minor-most (``minor_to_major = [0, 3, ...]``) fills
32 of 128 lanes and stores 4x its elements; with the feature dimension minor-most (``[3, 0,
...]``) it stores 2x. The flat configuration features of :func:`~graphopt.costmodel.gbdt.
layout_features` name dimension indices only; this module joins them with the shapes.

Per configuration, per configurable node, per tensor (output, input, kernel), from
:func:`tiled_sizes`:

- the sizes of the minor-most and second-minor dimensions under the configured layout,
- the padding ratio: elements stored in ``(8, 128)`` tiles over the tensor's elements (>= 1).

And per configuration, over all tensors of all configurable nodes: the log of the stored elements
(sum), the log of the padding elements (stored minus real, plus one), the number of tensors whose
minor dimension is not a multiple of 128, and the number whose second-minor dimension is not a
multiple of 8. :func:`shape_layout_features` returns them all, one row per configuration.

Where the data comes from:

- Shapes: TpuGraphs' node features 21-26 (its README's numbering) are the output's dimensions, 27 their sum, 28 their
  product; files with constant columns dropped (the shipped alexnet sample keeps dimensions 0-3
  as its columns 8-11, sum and product as 12-13) shift them. :func:`shape_columns` finds them by
  that sum/product relation, so it works for both.
- Layouts: TpuGraphs' 18 configuration features are three ``minor_to_major`` lists of 6 (output,
  input, kernel), -1 where unset. The alexnet sample keeps 10: output 0-3, input 0-3, kernel 0-1
  (:func:`config_slots`). An unset layout (first entry -1) means XLA's default, ``minor_to_major
  = [rank - 1, ..., 0]``.
- Operands: TpuGraphs' ``edge_index`` lists a node's producers by id, not in operand order, so
  which producer is the input and which the kernel is inferred (:func:`operand_slots`).

Measured on the XLA alexnet sample (``python bench/bench_costmodel.py tpugraphs-shapes``, results
in ``docs/results/costmodel.md``): these features do not improve LightGBM's ranking (Kendall tau
0.770 with them, 0.771 without, random split; 0.777 and 0.779 split by distinct configuration).
Within one graph every configurable node's shapes are constants, so each per-node feature here is
a fixed function of that node's layout columns, which trees already split on; only the totals add
a new direction, and they hardly order the runtimes (tau 0.05 for the stored elements). The GNN,
given the per-node features, ties too (0.765 vs 0.766; 0.772 vs 0.772). So
nothing in :mod:`graphopt.costmodel` featurises with this module (``graphopt costmodel train``
does not use it); shapes could only carry across graphs, in a model trained on many.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np
import numpy.typing as npt

from graphopt.costmodel.tpugraphs import LayoutGraph

TILE = (8, 128)
"""TPU tile: (second-minor, minor) multiples a tensor's two minor-most dimensions are padded to."""

TENSORS = ("output", "input", "kernel")
"""The tensors of a configurable node whose layout a configuration sets, in config order."""

PER_TENSOR = ("minor", "second_minor", "pad_ratio")
"""Features per configurable node and tensor (see :func:`shape_layout_features`)."""

TOTALS = ("log_stored", "log_padding", "minor_not_128", "second_not_8")
"""Whole-configuration features (see :func:`shape_layout_features`)."""


def shape_columns(node_feat: npt.ArrayLike) -> tuple[int, int]:
    """Where a TpuGraphs node-feature matrix keeps the output shape's dimensions.

    The dimension columns are a run ``d_0 .. d_{r-1}`` of consecutive non-negative columns
    followed by a column equal to their sum and one equal to the product of their non-zero
    entries, on every node (TpuGraphs' features 21-28, whatever constant columns were dropped
    before them). Window features satisfy the same relation (sizes, their sum and product); of
    all such runs this takes the longest, then the one whose product column takes the most
    distinct values (tensor sizes vary far more than window sizes).

    Returns:
        ``(first, count)``: the dimension columns are ``first .. first + count - 1``.

    Raises:
        ValueError: no such run exists (not a TpuGraphs node-feature matrix).
    """
    feat = np.asarray(node_feat, dtype=np.float64)
    if feat.ndim != 2:
        raise ValueError(f"node_feat must have shape (N, F), got {feat.shape}")
    best: tuple[int, int] | None = None
    best_key = (0, 0)
    for count in range(1, 7):
        for first in range(feat.shape[1] - count - 1):
            dims = feat[:, first : first + count]
            if not (dims >= 0).all() or not (dims > 0).any():
                continue
            total = feat[:, first + count]
            product = np.prod(np.where(dims > 0, dims, 1.0), axis=1)
            if np.array_equal(dims.sum(axis=1), total) and np.array_equal(
                product, feat[:, first + count + 1]
            ):
                key = (count, np.unique(feat[:, first + count + 1]).size)
                if key > best_key:
                    best, best_key = (first, count), key
    if best is None:
        raise ValueError(
            "node_feat has no shape columns (dimensions followed by their sum and product, as "
            "TpuGraphs' features 21-28); pass TpuGraphs node features, raw (not log-scaled)"
        )
    return best


def node_shapes(node_feat: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each node's output dimensions and rank, read from TpuGraphs node features.

    The rank is the position of the last non-zero dimension plus one (0 for a scalar).

    Shapes:
        - node_feat: ``(N, F)`` raw TpuGraphs features
        - return: dims ``(N, R)`` int64 (0 past the rank), rank ``(N,)`` int64
    """
    first, count = shape_columns(node_feat)
    dims = np.asarray(node_feat, dtype=np.float64)[:, first : first + count].astype(np.int64)
    nonzero = dims > 0
    rank = np.where(nonzero.any(axis=1), count - np.argmax(nonzero[:, ::-1], axis=1), 0)
    return dims, rank.astype(np.int64)


def config_slots(num_config_features: int) -> tuple[tuple[int, int], ...]:
    """Column ranges ``(start, stop)`` of the output, input and kernel layouts in a config row.

    18 features: TpuGraphs' own layout (three lists of 6). 10 features: the shipped alexnet sample
    (output 0-3, input 0-3, kernel 0-1; the rest was constant -1 and dropped).

    Raises:
        ValueError: any other count (the layout of the columns is then unknown).
    """
    if num_config_features == 18:
        return ((0, 6), (6, 12), (12, 18))
    if num_config_features == 10:
        return ((0, 4), (4, 8), (8, 10))
    raise ValueError(
        f"cannot tell which of {num_config_features} configuration features are the output, "
        "input and kernel layouts; TpuGraphs files have 18 (3 x 6 minor_to_major entries), the "
        "cleaned alexnet sample 10"
    )


def tiled_sizes(
    dims: npt.ArrayLike,
    rank: npt.ArrayLike,
    minor: npt.ArrayLike,
    second: npt.ArrayLike,
    tile: tuple[int, int] = TILE,
) -> tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """Sizes of a tensor's two minor-most dimensions, its elements, and its elements in tiles.

    Broadcasts over leading axes. ``minor`` and ``second`` are dimension indices (the first two
    entries of ``minor_to_major``); -1 means unset and takes XLA's default (``minor = rank - 1``;
    ``second`` the highest other index). A rank-0 or rank-1 tensor has second-minor size 1 (a
    scalar also minor size 1). The stored elements round the minor size up to a multiple of
    ``tile[1]`` and the second-minor size up to a multiple of ``tile[0]``:
    ``stored = elements / (m * s) * ceil(m / tile[1]) * tile[1] * ceil(s / tile[0]) * tile[0]``.

    Example: dims ``(32, 54, 54, 64)``, minor 0, second 3: sizes 32 and 64, 5,971,968 elements,
    stored 5,971,968 / 2048 * 128 * 64 = 23,887,872 (padding ratio 4).

    Shapes:
        - dims: ``(..., R)`` non-negative; rank, minor, second: ``(...)``
        - return: ``(minor_size, second_size, elements, stored)``, each ``(...)`` int64

    Raises:
        ValueError: an index is not below the tensor's rank, or minor equals second.
    """
    d = np.asarray(dims, dtype=np.int64)
    r, m, s = (np.asarray(a, dtype=np.int64) for a in (rank, minor, second))
    lead = np.broadcast_shapes(d.shape[:-1], r.shape, m.shape, s.shape)
    d = np.broadcast_to(d, (*lead, d.shape[-1]))
    r, m, s = (np.broadcast_to(a, lead) for a in (r, m, s))
    m = np.where(m < 0, r - 1, m)
    default_second = np.where(m == r - 1, r - 2, r - 1)
    s = np.where(s < 0, default_second, s)
    has_minor, has_second = r >= 1, r >= 2
    if ((m >= r) & has_minor).any() or ((s >= r) & has_second).any():
        raise ValueError("a layout names a dimension at or past the tensor's rank")
    if ((m == s) & has_second).any():
        raise ValueError("a layout names the same dimension as minor-most and second-minor")
    positions = np.arange(d.shape[-1])
    in_rank = positions < r[..., None]
    elements = np.prod(np.where(in_rank, d, 1), axis=-1)
    minor_size = np.where(
        has_minor, np.take_along_axis(d, np.maximum(m, 0)[..., None], -1)[..., 0], 1
    )
    second_size = np.where(
        has_second, np.take_along_axis(d, np.maximum(s, 0)[..., None], -1)[..., 0], 1
    )
    rest = np.prod(
        np.where(in_rank & (positions != m[..., None]) & (positions != s[..., None]), d, 1), axis=-1
    )
    rows, lanes = tile
    stored = rest * (-(-minor_size // lanes) * lanes) * (-(-second_size // rows) * rows)
    return minor_size, second_size, elements, stored


def operand_slots(
    layout: LayoutGraph, rank: npt.ArrayLike, dims: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Which producer is the input and which the kernel of each configurable node (-1: none).

    TpuGraphs lists a node's producers by id, not in operand order, so the order is inferred.
    A slot's *named dimensions* are the indices its configurations put minor-most or
    second-minor. Candidates are the ordered pairs of distinct producers (one producer: it is the
    input, there is no kernel) whose ranks admit every index named for their slot. Of those,
    the one wins whose named dimensions agree most with each other's and the output's: the pairs
    of named dimensions of equal size, counted between output and input, output and kernel, input
    and kernel. Layout assignment names the batch and feature dimensions, and each of those is
    shared by two of the three tensors (a convolution's batch by output and input, its input
    features by input and kernel, its output features by kernel and output; a dot's M, K, N
    likewise), while window and spatial sizes are not. Further ties go to the larger named
    dimensions (sum of log sizes), then to the first pair in edge order. Two 2-D operands whose
    layouts name both dimensions stay ambiguous (the sample's dots): edge order decides.

    Shapes:
        - rank: ``(N,)``; dims: ``(N, R)`` (see :func:`node_shapes`)
        - return: ``(C, 2)`` int64 node ids (input, kernel)
    """
    rank = np.asarray(rank, dtype=np.int64)
    dims = np.asarray(dims, dtype=np.int64)
    slots = config_slots(layout.config_feat.shape[2])
    producer, consumer = layout.edges
    result = np.full((len(layout.config_node_ids), 2), -1, dtype=np.int64)
    for c, node in enumerate(layout.config_node_ids):
        named = []
        for start, _ in slots:
            idx = np.unique(layout.config_feat[:, c, start : start + 2].astype(np.int64))
            named.append(idx[idx >= 0])
        producers = list(dict.fromkeys(producer[consumer == node].tolist()))
        candidates: list[tuple[int, int]] = (
            [(producers[0], -1)] if len(producers) == 1 else list(permutations(producers, 2))
        )
        best, best_key = None, (-1, -np.inf)
        for pair in candidates:
            tensors = (int(node), *pair)
            if any(
                (t < 0 and idx.size) or (t >= 0 and idx.size and idx.max() >= rank[t])
                for t, idx in zip(tensors, named, strict=True)
            ):
                continue
            sizes = [
                dims[t][idx] if t >= 0 else dims[0][:0]
                for t, idx in zip(tensors, named, strict=True)
            ]
            agree = sum(
                int((sizes[a][:, None] == sizes[b][None, :]).sum())
                for a, b in ((0, 1), (0, 2), (1, 2))
            )
            key = (agree, float(sum(np.log(np.maximum(z, 1)).sum() for z in sizes[1:])))
            if key > best_key:
                best, best_key = pair, key
        if best is not None:
            result[c] = best
    return result


def shape_layout_features(
    layout: LayoutGraph, tile: tuple[int, int] = TILE
) -> tuple[npt.NDArray[np.float32], list[str]]:
    """Shape-aware features of every configuration of ``layout`` (module docstring).

    Per configurable node ``c`` and tensor ``t`` (:data:`TENSORS`), the :data:`PER_TENSOR`
    features: minor-most size, second-minor size, padding ratio (stored over real elements); -1
    for all three where the node has no such tensor. Then the :data:`TOTALS` over all present
    tensors. Column names are ``"{c}.{t}.{feature}"`` and the total's name.

    Shapes:
        - return: ``(K, C * 3 * 3 + 4)`` float32, and the ``C * 3 * 3 + 4`` column names
    """
    dims, rank = node_shapes(layout.node_feat)
    operands = operand_slots(layout, rank, dims)
    slots = config_slots(layout.config_feat.shape[2])
    nodes = np.concatenate([layout.config_node_ids[:, None], operands], axis=1)  # (C, 3)
    present = nodes >= 0
    safe = np.where(present, nodes, 0)
    cfg = layout.config_feat.astype(np.int64)
    order = np.stack([cfg[:, :, start : start + 2] for start, _ in slots], axis=2)  # (K, C, 3, 2)
    minor, second = order[..., 0], order[..., 1]
    # an absent tensor: a rank-0 placeholder, whatever the configuration says
    tensor_rank = np.where(present, rank[safe], 0)
    minor = np.where(present, minor, -1)
    second = np.where(present, second, -1)
    m, s, elements, stored = tiled_sizes(dims[safe], tensor_rank, minor, second, tile)
    pad = stored / np.maximum(elements, 1)
    per = np.stack([m, s, pad], axis=-1).astype(np.float64)  # (K, C, 3, 3)
    per = np.where(present[None, :, :, None], per, -1.0)
    k = cfg.shape[0]
    weight = present[None].astype(np.float64)
    stored_total = (stored * weight).sum(axis=(1, 2))
    padding_total = ((stored - elements) * weight).sum(axis=(1, 2))
    rows, lanes = tile
    totals = np.stack(
        [
            np.log(np.maximum(stored_total, 1.0)),
            np.log1p(padding_total),
            ((m % lanes != 0) * weight).sum(axis=(1, 2)),
            ((s % rows != 0) * weight).sum(axis=(1, 2)),
        ],
        axis=1,
    )
    names = [
        f"{c}.{t}.{f}" for c in range(nodes.shape[0]) for t in TENSORS for f in PER_TENSOR
    ] + list(TOTALS)
    out = np.concatenate([per.reshape(k, -1), totals], axis=1).astype(np.float32)
    return out, names
