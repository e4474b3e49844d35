"""Tests of graphopt.workloads.random_dags."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.workloads.random_dags import layered_dag, series_parallel_dag

GENERATORS = [layered_dag, series_parallel_dag]


@pytest.mark.parametrize("make", GENERATORS)
def test_seed_determines_the_graph(make) -> None:  # type: ignore[no-untyped-def]
    a, b, c = make(300, 7), make(300, 7), make(300, 8)
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint
    assert a.num_ops == c.num_ops == 300


@pytest.mark.parametrize("make", GENERATORS)
@pytest.mark.parametrize("n", [2, 3, 57, 1000])
def test_valid_dag_with_plausible_costs(make, n: int) -> None:  # type: ignore[no-untyped-def]
    g = make(n, 0)
    assert g.num_ops == n and np.all(g.edge_src < g.edge_dst)
    assert np.all(g.output_bytes >= 1024) and np.all(g.output_bytes <= 32 * 2**20)
    assert np.all(g.flops >= 0) and np.all(g.param_bytes >= 0)
    reads = np.bincount(g.edge_dst, weights=g.edge_bytes, minlength=n)
    np.testing.assert_allclose(g.bytes_accessed, reads + g.output_bytes + g.param_bytes)
    np.testing.assert_array_equal(g.edge_bytes, g.output_bytes[g.edge_src])
    movement = np.isin(g.op_types, ["Reshape", "ConcatV2", "Transpose", "Slice"])
    assert np.all(g.flops[movement] == 0)
    heavy = np.isin(g.op_types, ["MatMul", "Conv2D", "BatchMatMulV2"])
    assert np.all(g.param_bytes[~heavy] == 0)
    if n >= 1000:
        assert heavy.mean() == pytest.approx(0.3, abs=0.05)
        assert (g.param_bytes > 0).sum() > 0


def test_series_parallel_has_one_source_and_one_sink() -> None:
    g = series_parallel_dag(500, 3)
    indeg = np.bincount(g.edge_dst, minlength=g.num_ops)
    outdeg = np.bincount(g.edge_src, minlength=g.num_ops)
    assert (indeg == 0).sum() == 1 and (outdeg == 0).sum() == 1


def test_layered_ops_feed_the_next_layer() -> None:
    g = layered_dag(400, 5, width=10)
    layer = np.array([int(s.split("_")[1]) for s in g.layer])
    outdeg = np.bincount(g.edge_src, minlength=g.num_ops)
    assert np.all(outdeg[layer < layer.max()] > 0)
    # edges go to the next layer, or skip back to earlier ones
    assert np.all(layer[g.edge_dst] > layer[g.edge_src])


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="num_ops must be an integer >= 2"):
        layered_dag(1, 0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        series_parallel_dag(10, 0, series_prob=1.5)
