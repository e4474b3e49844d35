from __future__ import annotations

import numpy as np

from graphopt.eval.gantt import plot_gantt
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.typing import Decision


def test_gantt_writes_a_png(tmp_path):
    ops = [
        Op(f"o{i}", "MatMul" if i % 2 else "Add", flops=1e9, bytes_accessed=1e6, output_bytes=1e6)
        for i in range(8)
    ]
    edges = [(f"o{i}", f"o{i + 1}", 1e6) for i in range(7)]
    g = CompGraph.build("g", ops, edges)
    cluster = get_cluster("v100-nvlink-2")
    m = simulate(g, cluster, Decision(placement=np.arange(8) % 2), schedule=True)
    assert m.schedule is not None and len(m.schedule.transfers) == 7
    path = plot_gantt(g, cluster, m.schedule, tmp_path / "sub" / "g.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
