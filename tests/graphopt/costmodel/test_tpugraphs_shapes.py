"""Shape-aware layout features: tile padding by hand, shape columns, operand order, the sample."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from graphopt.costmodel.layout_shapes import (
    PER_TENSOR,
    TENSORS,
    TOTALS,
    config_slots,
    node_shapes,
    operand_slots,
    shape_columns,
    shape_layout_features,
    tiled_sizes,
)
from graphopt.costmodel.tpugraphs import LayoutGraph, load_tpugraphs
from graphopt.data import TPUGRAPHS_SAMPLE as ALEXNET

# ---- tiled_sizes --------------------------------------------------------------------------------


def test_batch_minor_conv_output_stores_four_times_its_elements() -> None:
    # (32, 54, 54, 64), minor_to_major [0, 3, ...]: 32 of 128 lanes used, 64 rows a multiple of 8
    m, s, elements, stored = tiled_sizes([32, 54, 54, 64], 4, 0, 3)
    assert (m, s) == (32, 64)
    assert elements == 32 * 54 * 54 * 64 == 5_971_968
    assert stored == 54 * 54 * 128 * 64 == 4 * elements


def test_feature_minor_conv_output_stores_twice_its_elements() -> None:
    m, s, elements, stored = tiled_sizes([32, 54, 54, 64], 4, 3, 0)
    assert (m, s) == (64, 32)
    assert stored == 54 * 54 * 128 * 32 == 2 * elements


def test_unset_layout_is_row_major() -> None:
    # -1: minor = rank - 1, second = the highest other index
    got = tuple(int(v) for v in tiled_sizes([6400, 4096], 2, -1, -1))
    assert got == (4096, 6400, 6400 * 4096, 6400 * 4096)
    # minor given, second unset: the highest index other than the minor one
    m, s, _, _ = tiled_sizes([5, 7, 9], 3, 2, -1)
    assert (m, s) == (9, 7)
    m, s, _, _ = tiled_sizes([5, 7, 9], 3, 0, -1)
    assert (m, s) == (5, 9)


def test_odd_sizes_round_up_to_the_tile() -> None:
    # (100, 100) row-major: minor 100 -> 128, second 100 -> 104
    _, _, elements, stored = tiled_sizes([100, 100], 2, 1, 0)
    assert elements == 10_000 and stored == 104 * 128
    # custom tile (2, 4): (3, 5) -> minor 5 -> 8, second 3 -> 4
    _, _, elements, stored = tiled_sizes([3, 5], 2, 1, 0, tile=(2, 4))
    assert elements == 15 and stored == 32


def test_rank_one_and_scalar_fill_one_tile() -> None:
    assert tuple(int(v) for v in tiled_sizes([1, 0, 0], 1, 0, -1)) == (1, 1, 1, 1024)
    assert tuple(int(v) for v in tiled_sizes([300, 0], 1, -1, -1)) == (300, 1, 300, 384 * 8)
    assert tuple(int(v) for v in tiled_sizes([0, 0], 0, -1, -1)) == (1, 1, 1, 1024)


def test_tiled_sizes_broadcasts_over_configurations() -> None:
    m, s, elements, stored = tiled_sizes([[32, 54, 54, 64]], 4, [0, 3, -1], [3, 0, -1])
    assert m.tolist() == [32, 64, 64] and s.tolist() == [64, 32, 54]
    assert elements.tolist() == [5_971_968] * 3
    assert stored.tolist() == [4 * 5_971_968, 2 * 5_971_968, 32 * 54 * 56 * 128]


@pytest.mark.parametrize(("minor", "second"), [(4, 0), (0, 4), (2, 2)])
def test_bad_layout_indices_are_rejected(minor: int, second: int) -> None:
    with pytest.raises(ValueError, match="rank|same dimension"):
        tiled_sizes([32, 54, 54, 64], 4, minor, second)


# ---- shape columns, ranks, slots ----------------------------------------------------------------


def _with_shapes(dims: np.ndarray, decoy: bool = True) -> np.ndarray:
    """Node features: a junk column, the dims, their sum and product, then a window-like decoy."""
    n = dims.shape[0]
    product = np.prod(np.where(dims > 0, dims, 1), axis=1)
    cols = [np.arange(n)[:, None] % 2, dims, dims.sum(1)[:, None], product[:, None]]
    if decoy:  # sizes 1-2 with their sum and product: the same relation, fewer distinct values
        window = np.ones((n, dims.shape[1]), dtype=np.int64)
        window[0, 0] = 2
        cols += [window, window.sum(1)[:, None], window.prod(1)[:, None]]
    return np.concatenate(cols, axis=1).astype(np.float32)


def test_shape_columns_found_past_dropped_columns_and_a_decoy() -> None:
    dims = np.array([[32, 64, 0], [64, 100, 0], [32, 100, 0], [1, 0, 0], [0, 0, 0]])
    feat = _with_shapes(dims)
    assert shape_columns(feat) == (1, 3)
    got_dims, rank = node_shapes(feat)
    assert got_dims.tolist() == dims.tolist()
    assert rank.tolist() == [2, 2, 2, 1, 0]


def test_shape_columns_of_the_sample() -> None:
    layout = load_tpugraphs(ALEXNET)
    assert shape_columns(layout.node_feat) == (8, 4)
    dims, rank = node_shapes(layout.node_feat)
    assert dims[86].tolist() == [32, 54, 54, 64] and rank[86] == 4
    assert dims[123].tolist() == [32, 6400, 0, 0] and rank[123] == 2


def test_no_shape_columns_is_an_error() -> None:
    with pytest.raises(ValueError, match="no shape columns"):
        shape_columns(np.ones((4, 5), dtype=np.float32) * np.arange(5))


def test_config_slots() -> None:
    assert config_slots(18) == ((0, 6), (6, 12), (12, 18))
    assert config_slots(10) == ((0, 4), (4, 8), (8, 10))
    with pytest.raises(ValueError, match="18"):
        config_slots(7)


# ---- a hand-computed dot ------------------------------------------------------------------------


def _dot_layout() -> LayoutGraph:
    """x (32, 64) @ w (64, 100) -> y (32, 100); y configurable, two configurations."""
    dims = np.array([[32, 64], [64, 100], [32, 100]])
    a = [1, 0, -1, -1, 1, 0, -1, -1, 1, 0]  # all row-major, named explicitly
    b = [0, 1, -1, -1, 0, 1, -1, -1, -1, -1]  # output and input column-major, kernel unset
    return LayoutGraph(
        name="dot",
        node_feat=_with_shapes(dims, decoy=False),
        node_opcode=np.array([1, 1, 2], dtype=np.int64),
        edges=np.array([[0, 1], [2, 2]], dtype=np.int64),
        config_node_ids=np.array([2], dtype=np.int64),
        config_feat=np.array([[a], [b]], dtype=np.float32),
        runtime=np.array([1.0, 2.0]),
    )


def test_dot_features_by_hand() -> None:
    x, names = shape_layout_features(_dot_layout())
    assert x.shape == (2, 3 * 3 + 4) and len(names) == 13
    assert names[:3] == ["0.output.minor", "0.output.second_minor", "0.output.pad_ratio"]
    assert names[-4:] == list(TOTALS)
    col = {name: i for i, name in enumerate(names)}
    # config a: y (32, 100) -> 32 x 128; x (32, 64) -> 32 x 128; w (64, 100) -> 64 x 128
    assert x[0, col["0.output.minor"]] == 100 and x[0, col["0.output.second_minor"]] == 32
    assert x[0, col["0.output.pad_ratio"]] == pytest.approx(4096 / 3200)
    assert x[0, col["0.input.pad_ratio"]] == pytest.approx(4096 / 2048)
    assert x[0, col["0.kernel.minor"]] == 100
    assert x[0, col["log_stored"]] == pytest.approx(np.log(4096 + 4096 + 8192))
    assert x[0, col["log_padding"]] == pytest.approx(np.log1p(16384 - 11648))
    assert x[0, col["minor_not_128"]] == 3 and x[0, col["second_not_8"]] == 0
    # config b: y minor 32 -> 128, second 100 -> 104; x minor 32 -> 128; w unset: row-major
    assert x[1, col["0.output.minor"]] == 32 and x[1, col["0.output.second_minor"]] == 100
    assert x[1, col["0.output.pad_ratio"]] == pytest.approx(128 * 104 / 3200)
    assert x[1, col["0.input.pad_ratio"]] == pytest.approx(128 * 64 / 2048)
    assert x[1, col["0.kernel.minor"]] == 100 and x[1, col["0.kernel.second_minor"]] == 64
    assert x[1, col["log_stored"]] == pytest.approx(np.log(13312 + 8192 + 8192))
    assert x[1, col["log_padding"]] == pytest.approx(np.log1p(29696 - 11648))
    assert x[1, col["minor_not_128"]] == 3 and x[1, col["second_not_8"]] == 1


def test_missing_kernel_reads_minus_one() -> None:
    layout = _dot_layout()
    config = layout.config_feat.copy()
    config[..., 8:] = -1
    one_operand = replace(layout, edges=np.array([[0], [2]], dtype=np.int64), config_feat=config)
    x, names = shape_layout_features(one_operand)
    kernel = [names.index(f"0.kernel.{f}") for f in PER_TENSOR]
    assert (x[:, kernel] == -1).all()
    assert x[0, names.index("log_stored")] == pytest.approx(np.log(4096 + 4096))


# ---- operand order on the sample ----------------------------------------------------------------


def test_operand_order_of_the_sample_convolutions() -> None:
    layout = load_tpugraphs(ALEXNET)
    dims, rank = node_shapes(layout.node_feat)
    pairs = operand_slots(layout, rank, dims).tolist()
    slots = dict(zip(layout.config_node_ids.tolist(), pairs, strict=True))
    # forward conv: image (32, 224, 224, 3) is the input, the (11, 11, 3, 64) filter the kernel
    assert slots[86] == [84, 85]
    # input gradient: listed filter first by id, but the gradient (32, 12, 12, 256) is the input
    assert slots[239] == [238, 115]
    # reshape (32, 5, 5, 256) -> (32, 6400): one operand
    assert slots[123] == [122, -1]


def test_sample_features_follow_the_configured_layout() -> None:
    layout = load_tpugraphs(ALEXNET)
    x, names = shape_layout_features(layout)
    c = int(np.flatnonzero(layout.config_node_ids == 86)[0])
    assert x.shape == (layout.num_configs, len(layout.config_node_ids) * 9 + 4)
    assert len(TENSORS) * len(PER_TENSOR) == 9
    assert np.isfinite(x).all()
    pad = x[:, names.index(f"{c}.output.pad_ratio")]
    minor = layout.config_feat[:, c, 0]
    # (32, 54, 54, 64): batch minor-most stores 4x, features minor-most 2x
    assert (pad[minor == 0] == 4).all() and (pad[minor == 3] == 2).all()
    assert (minor == 0).any() and (minor == 3).any()
