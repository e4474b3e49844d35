from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.placement import PLACERS, contiguous_split, round_robin, single_device
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster


def graph(n: int) -> CompGraph:
    return CompGraph.build("g", [Op(f"o{i}", "X", flops=1.0) for i in range(n)], [])


def test_single_and_round_robin():
    cluster = get_cluster("v100-nvlink-4")
    assert single_device(graph(5), cluster).tolist() == [0] * 5
    assert single_device(graph(3), cluster, device=2).tolist() == [2] * 3
    assert round_robin(graph(6), cluster).tolist() == [0, 1, 2, 3, 0, 1]
    assert set(PLACERS) == {"single", "round-robin", "split"}
    with pytest.raises(ValueError, match="outside"):
        single_device(graph(2), cluster, device=4)
    assert all(p(graph(0), cluster).dtype == np.int64 for p in PLACERS.values())


def test_contiguous_split_balances_compute():
    # Ops of 1, 1, 1, 1, 4, 4, 4, 4 TFLOPs (plus equal launch overheads) on 2 equal devices: the
    # work midpoints are 0.5, 1.5, 2.5, 3.5, 6, 10+, 14, 18 of 20+, so ops 0-4 form the first stage.
    flops = [1, 1, 1, 1, 4, 4, 4, 4]
    g = CompGraph.build(
        "g",
        [Op(f"o{i}", "X", flops=f * 1e12) for i, f in enumerate(flops)],
        [(f"o{i}", f"o{i + 1}", 1.0) for i in range(7)],
    )
    cluster = get_cluster("v100-nvlink-2")
    placement = contiguous_split(g, cluster)
    assert placement.tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert np.all(np.diff(placement) >= 0)  # contiguous, in topological order
    assert contiguous_split(graph(0), cluster).tolist() == []
    assert contiguous_split(graph(4), get_cluster("v100-nvlink-4")).tolist() == [0, 1, 2, 3]


def test_contiguous_split_keeps_colocation_groups_together():
    # fwd0 -> fwd1 -> bwd1 -> bwd0: each layer's forward and backward share a colocation group, so
    # a 2-stage split puts layer 0 (fwd0, bwd0) on device 0 and layer 1 on device 1.
    ops = [
        Op("fwd0", "X", flops=1e12, colocation="l0"),
        Op("fwd1", "X", flops=1e12, colocation="l1"),
        Op("bwd1", "X", flops=1e12, colocation="l1"),
        Op("bwd0", "X", flops=1e12, colocation="l0"),
    ]
    edges = [("fwd0", "fwd1", 1.0), ("fwd1", "bwd1", 1.0), ("bwd1", "bwd0", 1.0)]
    g = CompGraph.build("g", ops, edges)
    placement = contiguous_split(g, get_cluster("v100-nvlink-2"))
    assert dict(zip(g.op_names, placement.tolist(), strict=True)) == {
        "fwd0": 0,
        "bwd0": 0,
        "fwd1": 1,
        "bwd1": 1,
    }
