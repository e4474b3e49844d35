from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.placement import PLACERS, round_robin, single_device
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster


def graph(n: int) -> CompGraph:
    return CompGraph.build("g", [Op(f"o{i}", "X", flops=1.0) for i in range(n)], [])


def test_single_and_round_robin():
    cluster = get_cluster("v100-nvlink-4")
    assert single_device(graph(5), cluster).tolist() == [0] * 5
    assert single_device(graph(3), cluster, device=2).tolist() == [2] * 3
    assert round_robin(graph(6), cluster).tolist() == [0, 1, 2, 3, 0, 1]
    assert set(PLACERS) == {"single", "round-robin"}
    with pytest.raises(ValueError, match="outside"):
        single_device(graph(2), cluster, device=4)
    assert all(p(graph(0), cluster).dtype == np.int64 for p in PLACERS.values())
