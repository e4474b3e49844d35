"""graphopt.decoders.joint_search: zero outputs decode to the reference, every decoded decision
is legal whatever the outputs, kernels move whole, and the search never returns worse than its
start and is reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.baselines.staged import measure_chain
from graphopt.decoders.decision import channels
from graphopt.decoders.fusion import is_legal
from graphopt.decoders.joint_search import JointDecoder, joint_move, search_joint
from graphopt.hardware import get_cluster
from graphopt.sim import Simulator
from graphopt.typing import Decision
from graphopt.workloads import get_graph

CLUSTER = get_cluster("v100-nvlink-4")
SIM = Simulator()
GRAPH = get_graph("wavenet-tiny")  # its best joint heuristic fuses: heft+heft-rank+greedy


def _reference(graph=GRAPH) -> tuple[Decision, str]:  # noqa: ANN001
    chain, _, best = measure_chain(graph, CLUSTER, "joint", SIM)
    assert best.decision is not None
    return best.decision.filled(graph.num_ops), chain.name


def _same(a: Decision, b: Decision) -> bool:
    return all(
        np.array_equal(getattr(a, k), getattr(b, k)) for k in ("placement", "priority", "fusion")
    )


def test_zero_outputs_decode_to_the_reference_exactly():
    ref, name = _reference()
    assert ref.fusion is not None and ref.fusion.any()  # the test needs fused kernels
    decoder = JointDecoder(GRAPH, CLUSTER, ref, name)
    assert decoder.names == channels("joint", CLUSTER.num_devices)
    assert _same(decoder.decode(np.zeros((decoder.num_channels, GRAPH.num_ops))), ref)


def test_every_decoded_decision_is_legal_and_kernels_move_whole():
    ref, name = _reference()
    decoder = JointDecoder(GRAPH, CLUSTER, ref, name)
    move, rng = joint_move(decoder), np.random.default_rng(0)
    outputs = np.zeros((decoder.num_channels, GRAPH.num_ops))
    moved = changed_priority = changed_fusion = 0
    for k in range(150):
        outputs = move(outputs, rng)
        d = decoder.decode(outputs)
        if k % 15 == 0:  # what the decoder keeps of earlier decodes changes nothing
            assert _same(JointDecoder(GRAPH, CLUSTER, ref, name).decode(outputs), d)
        assert d.placement is not None and d.priority is not None and d.fusion is not None
        assert is_legal(GRAPH, d.placement, d.fusion)
        assert SIM.evaluate(GRAPH, CLUSTER, d).valid
        moved += not np.array_equal(d.placement, ref.placement)
        changed_priority += not np.array_equal(d.priority, ref.priority)
        changed_fusion += not np.array_equal(d.fusion, ref.fusion)
    assert moved and changed_priority and changed_fusion  # every family of moves acts
    # a window of released ops towards device 3: the reference's fused kernels stay together
    outputs = np.zeros((decoder.num_channels, GRAPH.num_ops))
    outputs[decoder.channel("gate")] = 1.0
    outputs[decoder.channel("affinity:3"), : GRAPH.num_ops // 2] = 8.0
    d = decoder.decode(outputs)
    fused = np.flatnonzero(ref.fusion)
    src, dst = GRAPH.edge_src, GRAPH.edge_dst
    inner = np.isin(src, fused)
    kept = d.fusion[src[inner]] == 1
    assert np.array_equal(d.placement[src[inner]][kept], d.placement[dst[inner]][kept])
    assert kept.mean() > 0.9  # few kernels were split


def test_vetoes_and_additions_act_on_the_fusion_bits():
    ref, name = _reference()
    decoder = JointDecoder(GRAPH, CLUSTER, ref, name)
    outputs = np.zeros((decoder.num_channels, GRAPH.num_ops))
    fuse = decoder.channel("fusion")
    on = np.flatnonzero(ref.fusion)
    outputs[fuse, on[:5]] = -2.0  # vetoed
    d = decoder.decode(outputs)
    assert not d.fusion[on[:5]].any() and d.fusion.sum() == ref.fusion.sum() - 5
    assert np.array_equal(d.placement, ref.placement)
    vetoed_all = np.zeros_like(outputs)
    vetoed_all[fuse] = -2.0
    assert not decoder.decode(vetoed_all).fusion.any()
    off = np.setdiff1d(decoder.fusible, on)
    added = np.zeros_like(outputs)
    added[fuse, off] = 2.0  # every addition the mask allows: kept if legal, else none
    d = decoder.decode(added)
    assert is_legal(GRAPH, d.placement, d.fusion) and d.fusion.sum() >= ref.fusion.sum()


def test_a_priority_shift_runs_an_op_earlier():
    ref, name = _reference()
    decoder = JointDecoder(GRAPH, CLUSTER, ref, name)
    outputs = np.zeros((decoder.num_channels, GRAPH.num_ops))
    late = int(np.argmax(ref.priority))
    outputs[decoder.channel("priority"), late] = 8.0
    d = decoder.decode(outputs)
    assert d.priority[late] < GRAPH.num_ops - 1 and np.array_equal(d.placement, ref.placement)


def test_the_search_is_never_worse_than_its_start_replays_and_is_seeded():
    ref, name = _reference()
    start = SIM.evaluate(GRAPH, CLUSTER, ref)
    steps: list[int] = []
    found = search_joint(
        GRAPH,
        CLUSTER,
        ref,
        name,
        96,
        seed=4,
        cost_model=SIM,
        on_step=lambda k, d, m: steps.append(k),
    )
    assert found.calls == 96 and steps == list(range(1, 97))
    assert found.trace[0] == start.step_time  # the first call is the reference itself
    assert found.measurement.step_time <= start.step_time
    assert all(a >= b for a, b in zip(found.trace, found.trace[1:], strict=False))
    assert (
        Simulator().evaluate(GRAPH, CLUSTER, found.decision).step_time
        == found.measurement.step_time
    )
    again = search_joint(GRAPH, CLUSTER, ref, name, 96, seed=4)
    assert _same(again.decision, found.decision)


def test_a_graph_without_fusible_ops_searches_placement_and_priorities():
    graph = get_graph("pipedream:gnmt")
    ref, name = _reference(graph)
    found = search_joint(graph, CLUSTER, ref, name, 24, seed=0, cost_model=SIM)
    assert found.measurement.valid and found.calls == 24


def test_bad_input_is_refused_in_one_line():
    ref, name = _reference()
    decoder = JointDecoder(GRAPH, CLUSTER, ref, name)
    with pytest.raises(ValueError, match=r"decoder outputs have shape \(3, 226\); expected"):
        decoder.decode(np.zeros((3, GRAPH.num_ops)))
    with pytest.raises(ValueError, match="one entry per op"):
        JointDecoder(GRAPH, CLUSTER, Decision(placement=np.zeros(3, dtype=np.int64)))
    with pytest.raises(ValueError, match="budget must be >= 1"):
        search_joint(GRAPH, CLUSTER, ref, name, 0)
