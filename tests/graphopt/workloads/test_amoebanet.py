"""Tests of graphopt.workloads.amoebanet."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.graph import CompGraph
from graphopt.workloads.amoebanet import amoebanet

from ._helpers import assert_valid_training_graph, forward_mask

# NASNet-A cells (Zoph et al. 2018) in the same encoding, to check the skeleton against a
# published count: NASNet-A Large (N=6, F=168, 331x331): 88.9M parameters, 23.8B multiply-adds.
NASNET_A_NORMAL = {
    "operations": [
        "separable_5x5_2",
        "separable_3x3_2",
        "separable_5x5_2",
        "separable_3x3_2",
        "avg_pool_3x3",
        "none",
        "avg_pool_3x3",
        "avg_pool_3x3",
        "separable_3x3_2",
        "none",
    ],
    "indices": [0, 1, 1, 1, 0, 1, 1, 1, 0, 0],
    "used": [1, 0, 0, 0, 0, 0, 0],
}
NASNET_A_REDUCTION = {
    "operations": [
        "separable_5x5_2",
        "separable_7x7_2",
        "max_pool_3x3",
        "separable_7x7_2",
        "avg_pool_3x3",
        "separable_5x5_2",
        "none",
        "avg_pool_3x3",
        "separable_3x3_2",
        "max_pool_3x3",
    ],
    "indices": [0, 1, 0, 1, 0, 1, 3, 2, 2, 0],
    "used": [1, 1, 1, 0, 0, 0, 0],
}


def _macs_and_params(g: CompGraph) -> tuple[float, float]:
    fwd = forward_mask(g)
    main = np.array(["aux_logits" not in n for n in g.op_names])
    conv = np.isin(g.op_types, ["Conv2D", "DepthwiseConv2dNative", "MatMul"])
    batch = g.metadata["config"]["batch"]
    return g.flops[fwd & main & conv].sum() / 2 / batch, g.param_bytes[main].sum() / 4


def test_skeleton_reproduces_nasnet_a_large() -> None:
    g = amoebanet(
        filters=168, batch=1, normal_cell=NASNET_A_NORMAL, reduction_cell=NASNET_A_REDUCTION
    )
    macs, params = _macs_and_params(g)
    assert macs == pytest.approx(23.8e9, rel=0.01)
    assert params == pytest.approx(88.9e6, rel=0.01)


def test_default_amoebanet_counts_as_documented() -> None:
    g = amoebanet(batch=1)
    assert_valid_training_graph(g)
    macs, params = _macs_and_params(g)
    assert macs == pytest.approx(29.6e9, rel=0.01)
    assert params == pytest.approx(111.8e6, rel=0.01)
    assert 3_000 <= g.num_ops <= 6_000


def test_cells_and_grids() -> None:
    g = amoebanet(num_cells=1, filters=8, batch=2, image_size=64)
    assert_valid_training_graph(g)
    names = set(g.op_names)
    assert {
        "stem_cell_0/cell_output",
        "reduction_cell_1/cell_output",
        "cell_2/cell_output",
    } <= names
    out = g.index["cell_0/cell_output"]
    assert g.output_bytes[out] == 4 * 2 * 8 * 8 * 6 * 8  # normal cells concatenate 6 states
    assert "cell_0/prev_reduction/path2/StridedSlice" in names  # factorised reduction of h_{-2}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="image_size >= 32"):
        amoebanet(image_size=16)
    bad = dict(NASNET_A_NORMAL, operations=["conv_9x9"] * 10)
    with pytest.raises(ValueError, match="unknown cell operation 'conv_9x9'"):
        amoebanet(num_cells=1, filters=8, batch=1, image_size=32, normal_cell=bad)
