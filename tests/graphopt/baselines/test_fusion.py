from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.fusion import (
    FUSERS,
    greedy_fusion,
    no_fusion,
    xla_fusion,
)
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import PreparedGraph, simulate
from graphopt.typing import Decision
from graphopt.workloads import get_graph, layered_dag, series_parallel_dag


def _graph() -> CompGraph:
    """MatMul -> BiasAdd -> Relu -> {MatMul2, Sum}; Sum -> Mul; MatMul2 -> Mul."""
    ops = [
        Op("mm", "MatMul", flops=2e9, bytes_accessed=3e6, output_bytes=1e6),
        Op("bias", "BiasAdd", flops=1e6, bytes_accessed=2e6, output_bytes=1e6),
        Op("relu", "Relu", flops=1e6, bytes_accessed=2e6, output_bytes=1e6),
        Op("mm2", "MatMul", flops=2e9, bytes_accessed=3e6, output_bytes=1e6),
        Op("sum", "Sum", flops=1e6, bytes_accessed=1e6, output_bytes=4e3),
        Op("mul", "Mul", flops=1e6, bytes_accessed=2e6, output_bytes=1e6),
    ]
    edges = [
        ("mm", "bias", 1e6),
        ("bias", "relu", 1e6),
        ("relu", "mm2", 1e6),
        ("relu", "sum", 1e6),
        ("sum", "mul", 4e3),
        ("mm2", "mul", 1e6),
    ]
    return CompGraph.build("t", ops, edges)


def _bits(graph: CompGraph, bits: np.ndarray) -> dict[str, int]:
    return dict(zip(graph.op_names, bits.tolist(), strict=True))


def test_registry_and_none():
    assert set(FUSERS) == {"none", "xla", "greedy", "inductor"}
    g, c = _graph(), get_cluster("v100-nvlink-2")
    assert no_fusion(g, c, Decision()).tolist() == [0] * g.num_ops
    with pytest.raises(ValueError, match="needs a graph imported from PyTorch"):
        FUSERS["inductor"](g, c, Decision())
    for name, fuser in FUSERS.items():
        if name == "inductor":
            continue
        bits = fuser(g, c, Decision())
        assert bits.dtype == np.int64 and bits.shape == (g.num_ops,)


def test_xla_rules():
    g, c = _graph(), get_cluster("v100-nvlink-2")
    bits = _bits(g, xla_fusion(g, c, Decision()))
    # mm and bias each feed one elementwise op; relu has two consumers (never duplicated);
    # mm2 is fused into Mul first, so sum, a second hero, stays out of that kernel (rule 2b).
    assert bits == {"mm": 1, "bias": 1, "relu": 0, "mm2": 1, "sum": 0, "mul": 0}
    # Different devices: no fusion across the cut (bias on device 1).
    placement = np.zeros(g.num_ops, dtype=np.int64)
    placement[g.index["bias"]] = 1
    bits = _bits(g, xla_fusion(g, c, Decision(placement=placement)))
    assert bits["mm"] == 0 and bits["bias"] == 0 and bits["mm2"] == 1
    # Size cap: at most two ops per kernel. Visiting in topological order, mm+bias fill a kernel.
    bits = _bits(g, xla_fusion(g, c, Decision(), max_kernel_ops=2))
    assert bits == {"mm": 1, "bias": 0, "relu": 0, "mm2": 1, "sum": 0, "mul": 0}
    assert xla_fusion(g, c, Decision(), max_kernel_ops=1).sum() == 0
    with pytest.raises(ValueError, match="max_kernel_ops"):
        xla_fusion(g, c, Decision(), max_kernel_ops=0)


def test_xla_legal_on_200_random_graphs_and_placements():
    """The docstring's argument, checked by the simulator: rule-based fusion is always legal, and
    so is any subset of its bits (smaller kernels of the same in-trees)."""
    rng = np.random.default_rng(0)
    cluster = get_cluster("v100-nvlink-4")
    fused = 0
    for k in range(200):
        n = int(rng.integers(3, 80))
        graph = (layered_dag if k % 2 else series_parallel_dag)(n, seed=1000 + k)
        prepared = PreparedGraph(graph, cluster)
        placements = rng.integers(0, 4, size=(4, n))
        placements[0] = 0  # one device: the most fusion
        bits = np.stack([xla_fusion(graph, cluster, Decision(placement=p)) for p in placements])
        indptr, dst = graph.successors_csr
        for p, b in zip(placements, bits, strict=True):
            for u in np.flatnonzero(b).tolist():
                assert indptr[u + 1] - indptr[u] == 1
                v = dst[indptr[u]]
                assert p[u] == p[v]
                assert graph.op_classes[v] in ("elementwise", "data_movement", "reduction")
        subsets = bits * rng.integers(0, 2, size=(4, n))
        out = prepared.evaluate_batch(
            np.concatenate([placements, placements]), None, np.concatenate([bits, subsets])
        )
        assert np.all(out.status != 2), f"illegal fusion on {graph.name}"
        fused += int(bits.sum())
    assert fused > 500  # the rule does fire


def test_xla_on_a_workload_is_legal_and_faster():
    graph, cluster = get_graph("gnmt-tiny"), get_cluster("v100-nvlink-2")
    decision = Decision(placement=np.zeros(graph.num_ops, dtype=np.int64))
    bits = xla_fusion(graph, cluster, decision)
    m = simulate(graph, cluster, Decision(placement=decision.placement, fusion=bits))
    assert m.valid and bits.sum() > 0
    assert m.step_time < simulate(graph, cluster, decision).step_time


@pytest.mark.parametrize("start", ["xla", "none"])
def test_greedy_improves_deterministically_within_budget(start, monkeypatch):
    rows = []
    original = PreparedGraph.evaluate_batch

    def counting(self, placements=None, priorities=None, fusions=None):
        rows.append(len(np.asarray(fusions)))
        return original(self, placements, priorities, fusions)

    monkeypatch.setattr(PreparedGraph, "evaluate_batch", counting)
    rng = np.random.default_rng(1)
    cluster = get_cluster("v100-nvlink-2")
    for k in range(8):
        graph = (layered_dag if k % 2 else series_parallel_dag)(int(rng.integers(8, 60)), seed=k)
        decision = Decision(placement=rng.integers(0, 2, size=graph.num_ops))
        rows.clear()
        bits = greedy_fusion(graph, cluster, decision, budget=60, start=start, batch_size=16)
        assert sum(rows) <= 60
        again = greedy_fusion(graph, cluster, decision, budget=60, start=start, batch_size=16)
        assert np.array_equal(bits, again)
        first = xla_fusion if start == "xla" else no_fusion
        start_bits = first(graph, cluster, decision)
        assert np.all(bits >= start_bits)  # only 0 -> 1 flips
        m = simulate(graph, cluster, Decision(placement=decision.placement, fusion=bits))
        m0 = simulate(graph, cluster, Decision(placement=decision.placement, fusion=start_bits))
        assert m.valid and m.step_time <= m0.step_time


def test_greedy_finds_something_on_a_workload():
    graph, cluster = get_graph("gnmt-tiny"), get_cluster("v100-nvlink-2")
    decision = Decision(placement=np.zeros(graph.num_ops, dtype=np.int64))
    bits = FUSERS["greedy"](graph, cluster, decision)
    xla = xla_fusion(graph, cluster, decision)
    step = simulate(graph, cluster, Decision(placement=decision.placement, fusion=bits)).step_time
    base = simulate(graph, cluster, Decision(placement=decision.placement, fusion=xla)).step_time
    assert step < base


def test_greedy_rejects_bad_arguments():
    g, c = _graph(), get_cluster("v100-nvlink-2")
    with pytest.raises(ValueError, match="budget"):
        greedy_fusion(g, c, Decision(), budget=0)
    with pytest.raises(ValueError, match="unknown start"):
        greedy_fusion(g, c, Decision(), start="all")
