"""Tests of graphopt.workloads.inception: published cost and size of Inception-v3."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.workloads.inception import inception_v3

from ._helpers import assert_valid_training_graph, forward_mask


def test_matches_published_cost_and_parameters() -> None:
    g = inception_v3(batch=1, aux_logits=False)
    assert_valid_training_graph(g)
    fwd = forward_mask(g)
    macs = g.flops[fwd & np.isin(g.op_types, ["Conv2D", "MatMul"])].sum() / 2
    assert macs == pytest.approx(5.72e9, rel=0.01)  # about 5.7 G multiply-adds per image
    assert g.param_bytes.sum() / 4 == pytest.approx(23.8e6, rel=0.01)  # incl. BN scale/offset
    assert sum(t == "Conv2D" for t in g.op_types) == 94


def test_default_graph() -> None:
    g = inception_v3()
    assert_valid_training_graph(g)
    assert 1_000 <= g.num_ops <= 2_000
    assert g.metadata["config"]["batch"] == 32
    assert "InceptionV3/AuxLogits/Conv2d_2a/Conv2D" in g.index


def test_grids() -> None:
    g = inception_v3(batch=2)
    i = g.index["InceptionV3/Mixed_7c/ConcatV2"]
    assert g.output_bytes[i] == 4 * 2 * 8 * 8 * 2048
    with pytest.raises(ValueError, match="image_size must be >= 75"):
        inception_v3(image_size=64)
