from __future__ import annotations

import numpy as np
import pytest
from helpers_baselines import tiny_cases

from graphopt.baselines.placement import PLACERS, contiguous_split, round_robin, single_device
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision


def graph(n: int) -> CompGraph:
    return CompGraph.build("g", [Op(f"o{i}", "X", flops=1.0) for i in range(n)], [])


def test_single_and_round_robin():
    cluster = get_cluster("v100-nvlink-4")
    assert single_device(graph(5), cluster).tolist() == [0] * 5
    assert single_device(graph(3), cluster, device=2).tolist() == [2] * 3
    assert round_robin(graph(6), cluster).tolist() == [0, 1, 2, 3, 0, 1]
    # the placer names: tests/graphopt/cli/test_startup.py checks them against the CLI's list
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


@pytest.mark.parametrize("name", sorted(PLACERS))
def test_every_placer_is_deterministic_and_valid(name):
    placer = PLACERS[name]
    placed = 0
    for g, cluster in tiny_cases():
        try:
            placement = placer(g, cluster)
        except ValueError as e:  # the DP's documented refusal of a graph with too many ideals
            assert name == "tarnawski-dp" and "ideals" in str(e), e
            continue
        placed += 1
        assert placement.dtype == np.int64 and placement.shape == (g.num_ops,)
        assert placement.min() >= 0 and placement.max() < cluster.num_devices
        assert np.array_equal(placement, placer(g, cluster))
        m = PreparedGraph(g, cluster).evaluate(Decision(placement=placement))
        assert np.isfinite(m.step_time) and m.step_time > 0
    assert placed >= 4


@pytest.mark.expensive
def test_large_graph_placers_give_valid_placements():
    """On gnmt-8 (86,562 ops) with 8 V100s every placer gives a placement the simulator runs, and
    the memory-aware placers stay valid (their speed: bench/bench_baselines.py)."""
    from graphopt.workloads import get_graph

    g, cluster = get_graph("gnmt-8"), get_cluster("v100-nvlink-8")
    for name in PLACERS:  # compile (or load the numba cache) on a small graph first
        PLACERS[name](get_graph("gnmt-tiny"), cluster)
    prepared = PreparedGraph(g, cluster)
    for name in ("heft", "heft-lc", "m-etf", "metis"):
        placement = PLACERS[name](g, cluster)
        assert prepared.evaluate(Decision(placement=placement)).step_time > 0, name
    for name in ("m-topo", "m-etf"):
        assert prepared.evaluate(Decision(placement=PLACERS[name](g, cluster))).valid


@pytest.mark.expensive
def test_bench_script_runs():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [
            sys.executable,
            str(root / "bench" / "bench_baselines.py"),
            "--graph",
            "gnmt-tiny",
            "--cluster",
            "v100-nvlink-2",
            "--repeats",
            "0",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        timeout=600,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert "m-etf" in out.stdout and "critical-path" in out.stdout
