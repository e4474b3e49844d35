from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.fusion import greedy_fusion, xla_fusion
from graphopt.decoders.fusion import ADD, VETO, decode_fusion, is_legal
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs

CLUSTER = get_cluster("v100-nvlink-2")


def cases():
    for graph in resolve_graphs("suite:tiny"):
        yield graph, Decision(placement=np.arange(graph.num_ops) % 2)


def test_zero_scores_are_the_xla_pass_and_zero_from_an_anchor_is_the_anchor():
    for graph, decision in cases():
        xla = xla_fusion(graph, CLUSTER, decision)
        np.testing.assert_array_equal(
            decode_fusion(graph, CLUSTER, decision, np.zeros(graph.num_ops)), xla
        )
        anchor = greedy_fusion(graph, CLUSTER, decision, budget=8)
        got = decode_fusion(graph, CLUSTER, decision, np.zeros(graph.num_ops), anchor=anchor)
        np.testing.assert_array_equal(got, anchor)


def test_vetoes_unset_bits_and_any_scores_stay_legal():
    rng = np.random.default_rng(0)
    sim = Simulator()
    for graph, decision in cases():
        n = graph.num_ops
        xla = xla_fusion(graph, CLUSTER, decision)
        veto = np.zeros(n)
        veto[xla == 1] = VETO - 1
        assert (decode_fusion(graph, CLUSTER, decision, veto)[xla == 1] == 0).all()
        for _ in range(3):
            score = rng.normal(0, 2, n)
            for anchor in (None, xla):
                bits = decode_fusion(graph, CLUSTER, decision, score, anchor=anchor)
                assert is_legal(graph, decision.placement, bits)
                full = Decision(decision.placement, None, bits)
                assert sim.evaluate(graph, CLUSTER, full).reason.find("illegal") < 0


def test_scores_above_add_fuse_what_the_pass_would():
    graph, decision = next(cases())
    xla = xla_fusion(graph, CLUSTER, decision)
    none = np.zeros(graph.num_ops, dtype=np.int64)
    score = np.full(graph.num_ops, ADD + 1)
    np.testing.assert_array_equal(decode_fusion(graph, CLUSTER, decision, score, anchor=none), xla)


def test_a_cycle_is_detected_without_simulating():
    # p -> x, p -> y, x -> z -> y: fusing p (with all its consumers) makes {p, x, y}, which
    # feeds z and is fed by it
    ops = [Op(name=x, type="add", flops=1.0, bytes_accessed=8.0, output_bytes=4.0) for x in "pxzy"]
    edges = [("p", "x", 4.0), ("p", "y", 4.0), ("x", "z", 4.0), ("z", "y", 4.0)]
    graph = CompGraph.build("cycle", ops, edges)
    zeros = np.zeros(4, dtype=np.int64)
    fused_p = np.zeros(4, dtype=np.int64)
    fused_p[graph.op_names.index("p")] = 1
    assert not is_legal(graph, zeros, fused_p)
    assert is_legal(graph, zeros, zeros)
    assert "cycle" in Simulator().evaluate(graph, CLUSTER, Decision(zeros, None, fused_p)).reason


def test_bad_scores_are_refused():
    graph, decision = next(cases())
    with pytest.raises(ValueError, match="shape"):
        decode_fusion(graph, CLUSTER, decision, np.zeros(3))
    score = np.zeros(graph.num_ops)
    score[2] = np.inf
    with pytest.raises(ValueError, match=f"op {graph.op_names[2]!r}"):
        decode_fusion(graph, CLUSTER, decision, score)
