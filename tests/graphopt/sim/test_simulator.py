"""Hand-worked cases: every expected number below is derived in the comment above it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_graph, unit_cluster

from graphopt.hardware import Cluster, Device
from graphopt.sim import PreparedGraph, Simulator, simulate
from graphopt.typing import CostModel, Decision


def by_op(measurement, graph):
    """op name -> (device, start, end) from a schedule."""
    out = {}
    for k in measurement.schedule.kernels:
        for i in k.ops:
            out[graph.op_names[i]] = (k.device, k.start, k.end)
    return out


def test_chain_time_and_memory():
    # a -> b -> c on one device, 1 FLOP/s: a [0,1], b [1,3], c [3,6] -> step 6.
    # Memory: a's 10 B live [0,3) (until b ends), b's 20 B [1,6), c's 30 B [3,6) (graph output).
    # At t=3 a is released before c allocates: 20 + 30 = 50; plus a's 5 B of parameters = 55.
    g = make_graph(
        [("a", 1, 0, 10, 5), ("b", 2, 0, 20, 0), ("c", 3, 0, 30, 0)],
        [("a", "b", 10), ("b", "c", 20)],
    )
    m = simulate(g, unit_cluster(1), Decision(), schedule=True)
    assert m.valid and m.reason == ""
    assert m.step_time == 6.0
    assert m.busy_time.tolist() == [6.0]
    assert m.peak_memory.tolist() == [55.0]
    assert m.bytes_moved == 0.0
    assert by_op(m, g) == {"a": (0, 0.0, 1.0), "b": (0, 1.0, 3.0), "c": (0, 3.0, 6.0)}


def test_fork_priority_changes_order():
    # a -> b, a -> c on one device; b takes 2 s, c 3 s.
    # Default (topological ties): b [1,3], c [3,6]. With priority c=0 < b=1: c [1,4], b [4,6].
    g = make_graph(
        [("a", 1, 0, 1, 0), ("b", 2, 0, 1, 0), ("c", 3, 0, 1, 0)], [("a", "b", 1), ("a", "c", 1)]
    )
    cluster = unit_cluster(1)
    default = by_op(simulate(g, cluster, Decision(), schedule=True), g)
    assert default["b"][1:] == (1.0, 3.0) and default["c"][1:] == (3.0, 6.0)
    prio = np.array([0, 1, 0])
    m = simulate(g, cluster, Decision(priority=prio), schedule=True)
    assert by_op(m, g)["c"][1:] == (1.0, 4.0) and by_op(m, g)["b"][1:] == (4.0, 6.0)
    assert m.step_time == 6.0


def test_diamond_across_two_devices():
    # a(dev0) -> b(dev0) -> d(dev0); a -> c(dev1) -> d. Links: latency 0.5 s, 10 B/s.
    # a [0,1]; a->dev1 carries 10 B: [1, 2.5]; c [2.5, 3.5]; c->dev0 carries 20 B: [3.5, 6];
    # b [1,3]; d waits for the transfer: [6,7] -> step 7; 30 B moved.
    # dev0 memory: a 10 B [0,3.5) (last consumer c ends 3.5), b 5 B [1,7), copy of c 20 B [3.5,7),
    #   d 1 B [6,7). At 3.5 a is released before the copy lands: 5 + 20 = 25; at 6: 26 -> peak 26.
    # dev1 memory: copy of a 10 B [1,3.5), c 20 B [2.5,7) -> peak 30 at 2.5.
    g = make_graph(
        [("a", 1, 0, 10, 0), ("b", 2, 0, 5, 0), ("c", 1, 0, 20, 0), ("d", 1, 0, 1, 0)],
        [("a", "b", 10), ("a", "c", 10), ("b", "d", 5), ("c", "d", 20)],
    )
    placement = np.array([0, 0, 1, 0])  # topological order is a, b, c, d
    assert g.op_names == ("a", "b", "c", "d")
    m = simulate(g, unit_cluster(2), Decision(placement=placement), schedule=True)
    assert m.step_time == 7.0
    assert m.bytes_moved == 30.0
    assert m.busy_time.tolist() == [4.0, 1.0]
    assert m.peak_memory.tolist() == [26.0, 30.0]
    ops = by_op(m, g)
    assert ops["c"] == (1, 2.5, 3.5) and ops["d"] == (0, 6.0, 7.0)
    transfers = [(t.producer, t.src, t.dst, t.start, t.end) for t in m.schedule.transfers]
    assert transfers == [(0, 0, 1, 1.0, 2.5), (2, 1, 0, 3.5, 6.0)]


def test_transfers_queue_on_one_link():
    # p [0,1], q [1,2] on dev0; p -> r, q -> s on dev1; no latency, 10 B/s.
    # p's 30 B transfer runs [1,4]; q's 10 B is queued at 2 but the link is busy until 4: [4,5].
    # r [4,5], s [5,6] -> step 6 (without queueing it would be 5: s [3,4], r [4,5]).
    g = make_graph(
        [("p", 1, 0, 30, 0), ("q", 1, 0, 10, 0), ("r", 1, 0, 1, 0), ("s", 1, 0, 1, 0)],
        [("p", "r", 30), ("q", "s", 10)],
    )
    placement = np.array([g.index[x] for x in ("p", "q", "r", "s")])
    placement = np.zeros(4, dtype=np.int64)
    placement[[g.index["r"], g.index["s"]]] = 1
    m = simulate(g, unit_cluster(2, latency=0.0), Decision(placement=placement), schedule=True)
    transfers = {g.op_names[t.producer]: (t.start, t.end) for t in m.schedule.transfers}
    assert transfers == {"p": (1.0, 4.0), "q": (4.0, 5.0)}
    assert m.step_time == 6.0


def test_one_transfer_per_remote_device():
    # a on dev0 feeds b and c, both on dev1: a's output crosses the link once (largest edge: 8 B).
    g = make_graph(
        [("a", 1, 0, 8, 0), ("b", 1, 0, 1, 0), ("c", 1, 0, 1, 0)], [("a", "b", 8), ("a", "c", 4)]
    )
    m = simulate(g, unit_cluster(2), Decision(placement=np.array([0, 1, 1])), schedule=True)
    assert len(m.schedule.transfers) == 1 and m.bytes_moved == 8.0
    # a [0,1]; transfer 0.5 + 0.8 = 1.3 s -> [1, 2.3]; b [2.3, 3.3]; c [3.3, 4.3].
    assert m.step_time == pytest.approx(4.3, abs=1e-12)


def test_out_of_memory_names_the_device():
    g = make_graph([("a", 1, 0, 10, 150), ("b", 1, 0, 10, 0)], [("a", "b", 10)])
    cluster = unit_cluster(2, memory=100.0)
    m = simulate(g, cluster, Decision(placement=np.array([1, 0])))
    assert not m.valid
    assert "out of memory on device 1 (dev1)" in m.reason
    assert m.peak_memory[1] == 160.0  # 150 B parameters + a's 10 B output
    assert m.step_time > 0  # the step time of an OOM decision is still reported
    ok = simulate(g, unit_cluster(2, memory=1000.0), Decision(placement=np.array([1, 0])))
    assert ok.valid


def test_legal_fusion_roofline_and_memory():
    # 1 FLOP/s, 1 B/s, launch 0.5 s.  a: 2 FLOPs, 3 B, out 1 B; b: 2 FLOPs, 4 B, out 2 B; c: 1 FLOP, 2 B.
    # Unfused: a max(2,3)+.5=3.5, b max(2,4)+.5=4.5, c max(1,2)+.5=2.5 -> step 10.5.
    # Fusing a into b: 4 FLOPs; bytes 3+4 - edge a->b (1) - a's output, now internal (1) = 5;
    #   max(4,5)+.5 = 5.5 -> step 8; a's output is never stored: peak = b's 2 B (+ c's 0.5 at 5.5
    #   after b's output... b's output lives until c ends) -> 2 + 0.5 = 2.5.
    g = make_graph(
        [("a", 2, 3, 1, 0), ("b", 2, 4, 2, 0), ("c", 1, 2, 0.5, 0)], [("a", "b", 1), ("b", "c", 2)]
    )
    cluster = unit_cluster(1, peak_flops=1.0, mem_bandwidth=1.0, launch=0.5)
    assert simulate(g, cluster).step_time == 10.5
    m = simulate(g, cluster, Decision(fusion=np.array([1, 0, 0])), schedule=True)
    assert m.valid and m.step_time == 8.0
    assert [k.ops for k in m.schedule.kernels] == [(0, 1), (2,)]
    assert m.peak_memory.tolist() == [2.5]


def test_fused_kernel_takes_root_device_and_measured_times():
    # Measured times: a 3 s, b 2 s on kind "unit", launch 0.5: fused = max(3+2-0.5, 3) = 4.5.
    from graphopt.graph import CompGraph, Op

    g = CompGraph.build(
        "m",
        [Op("a", "Add", measured={"unit": 3.0}), Op("b", "Relu", measured={"unit": 2.0})],
        [("a", "b", 1.0)],
    )
    cluster = unit_cluster(2, launch=0.5)
    m = simulate(
        g, cluster, Decision(placement=np.array([1, 1]), fusion=np.array([1, 0])), schedule=True
    )
    assert m.step_time == 4.5
    assert m.schedule.kernels[0].device == 1 and m.schedule.kernels[0].ops == (0, 1)
    assert m.bytes_moved == 0.0
    across = simulate(g, cluster, Decision(placement=np.array([0, 1]), fusion=np.array([1, 0])))
    assert not across.valid and "rule 2c" in across.reason and "'a'" in across.reason


def test_fusion_that_makes_a_cycle_is_illegal():
    # p -> u, p -> w, u -> v, v -> w. Fusing p merges p, u, w into one kernel; v sits between
    # u and w outside it: kernel -> v -> kernel is a cycle.
    g = make_graph(
        [("p", 1, 0, 1, 0), ("u", 1, 0, 1, 0), ("v", 1, 0, 1, 0), ("w", 1, 0, 1, 0)],
        [("p", "u", 1), ("p", "w", 1), ("u", "v", 1), ("v", "w", 1)],
    )
    fusion = np.zeros(4, dtype=np.int64)
    fusion[g.index["p"]] = 1
    m = simulate(g, unit_cluster(1), Decision(fusion=fusion))
    assert not m.valid and math.isinf(m.step_time)
    assert "illegal fusion" in m.reason and "'v'" in m.reason


def test_bad_decisions_raise():
    g = make_graph([("a", 1, 0, 1, 0), ("b", 1, 0, 1, 0)], [("a", "b", 1)])
    cluster = unit_cluster(2)
    with pytest.raises(ValueError, match=r"placement has entry 2 at op 1; allowed values are 0..1"):
        simulate(g, cluster, Decision(placement=np.array([0, 2])))
    with pytest.raises(ValueError, match=r"shape \(3,\); expected \(2,\)"):
        simulate(g, cluster, Decision(priority=np.array([0, 0, 0])))
    with pytest.raises(ValueError, match="fusion has entry 3"):
        simulate(g, cluster, Decision(fusion=np.array([3, 0])))
    with pytest.raises(ValueError, match="negative entry"):
        simulate(g, cluster, Decision(priority=np.array([-1, 0])))
    with pytest.raises(ValueError, match="integers"):
        simulate(g, cluster, Decision(placement=np.array([0.5, 0.0])))


def test_empty_graph():
    g = make_graph([], [])
    m = simulate(g, unit_cluster(2))
    assert m.valid and m.step_time == 0.0


def test_batch_equals_single_and_simulator_is_a_cost_model():
    rng = np.random.default_rng(0)
    g = make_graph(
        [(f"o{i}", float(rng.uniform(1, 3)), 0, 4, 1) for i in range(12)],
        [(f"o{i}", f"o{j}", 4.0) for i in range(12) for j in range(i + 1, min(12, i + 3))],
    )
    cluster = unit_cluster(3)
    placements = rng.integers(0, 3, size=(5, 12))
    priorities = rng.integers(0, 4, size=(5, 12))
    fusions = (rng.random((5, 12)) < 0.2).astype(np.int64)
    prepared = PreparedGraph(g, cluster)
    batch = prepared.evaluate_batch(placements, priorities, fusions)
    sim = Simulator()
    assert isinstance(sim, CostModel)
    for b in range(5):
        single = sim.evaluate(g, cluster, Decision(placements[b], priorities[b], fusions[b]))
        assert batch.step_time[b] == single.step_time
        assert batch.valid[b] == single.valid
        np.testing.assert_array_equal(batch.peak_memory[b], single.peak_memory)
    with pytest.raises(ValueError, match="expected"):
        prepared.evaluate_batch(placements, priorities[:2])
    with pytest.raises(ValueError, match="at least one"):
        prepared.evaluate_batch()
    assert sim.prepare(g, cluster) is sim.prepare(g, cluster)  # cached


def test_transfers_queued_at_one_instant_go_by_producer_index():
    # 1 FLOP/s, no latency, 1 B/s. dev0 runs x [0,1] then A [1,2]; x's 10 B hold link 0->1 [1,11].
    # y on dev1 [0,1] sends 1 B to dev0 [1,2], readying B (0 s), which runs at 2 after A ends.
    # A's and B's outputs are both queued on the busy link at t=2: B (index 2) before A (index 3):
    # B's 2 B [11,13], then A's 3 B [13,16] -- not in the order they were queued.
    g = make_graph(
        [
            ("x", 1, 0, 10, 0),
            ("y", 1, 0, 1, 0),
            ("B", 0, 0, 2, 0),
            ("A", 1, 0, 3, 0),
            ("cx", 1, 0, 1, 0),
            ("cB", 1, 0, 1, 0),
            ("cA", 1, 0, 1, 0),
        ],
        [("x", "cx", 10), ("y", "B", 1), ("B", "cB", 2), ("A", "cA", 3)],
    )
    assert g.op_names == ("x", "y", "B", "A", "cx", "cB", "cA")
    placement = np.array([0, 1, 0, 0, 1, 1, 1])
    m = simulate(
        g, unit_cluster(2, latency=0.0, bandwidth=1.0), Decision(placement=placement), schedule=True
    )
    assert by_op(m, g)["B"] == (0, 2.0, 2.0)
    sent = {g.op_names[t.producer]: (t.start, t.end) for t in m.schedule.transfers if t.src == 0}
    assert sent == {"x": (1.0, 11.0), "B": (11.0, 13.0), "A": (13.0, 16.0)}


def test_a_step_time_that_overflows_is_never_valid():
    from graphopt.graph import CompGraph, Op

    ops = [Op(n, "Relu", measured={"unit": 1e308}) for n in ("a", "b")]
    g = CompGraph.build("huge", ops, [("a", "b", 1.0)])
    cluster = unit_cluster(1)
    m = simulate(g, cluster, Decision())
    assert not m.valid and math.isinf(m.step_time) and "not finite" in m.reason
    batch = PreparedGraph(g, cluster).evaluate_batch(np.zeros((2, 2), dtype=np.int64))
    assert not batch.valid.any()


def efficient_cluster(table: dict) -> Cluster:
    """One device at 1 FLOP/s and 1 B/s, launch 0.5 s, with efficiency ``table``."""
    device = Device("d", "unit", 1.0, 1.0, 1e12, 0.5, efficiency=table)
    return Cluster("e", (device,), np.full((1, 1), np.inf), np.zeros((1, 1)))


def test_efficiency_scales_each_op_by_its_type_else_its_class():
    # Ops of type "Op" (make_graph), class elementwise. a: 2 FLOPs, 3 B; b: 2 FLOPs, 4 B;
    # c (class reduction): 1 FLOP, 2 B.
    g = make_graph(
        [("a", 2, 3, 1, 0), ("b", 2, 4, 2, 0), ("c", 1, 2, 0.5, 0, "reduction")],
        [("a", "b", 1), ("b", "c", 2)],
    )
    # elementwise at half the bandwidth: a max(2, 6) + .5 = 6.5, b max(2, 8) + .5 = 8.5;
    # reduction at a quarter of the FLOP rate: c max(4, 2) + .5 = 4.5 -> 19.5.
    by_class = {"elementwise": {"memory": 0.5}, "reduction": {"compute": 0.25}}
    assert simulate(g, efficient_cluster(by_class)).step_time == 19.5
    # The type "Op" wins over the class: every op at twice the FLOP rate, full bandwidth:
    # a max(1, 3), b max(1, 4), c max(.5, 2), each + .5 -> 10.5.
    both = {**by_class, "Op": {"compute": 2.0}}
    assert simulate(g, efficient_cluster(both)).step_time == 10.5
    # No entry: the plain roofline (10.5 as in test_legal_fusion_roofline_and_memory).
    assert simulate(g, efficient_cluster({})).step_time == 10.5


def test_fused_kernel_prices_each_member_at_its_own_rates():
    # a (elementwise, memory 0.5: 2 s per byte) fused into b (reduction, full rates).
    # Compute: 2 + 2 = 4 s. Memory: a 3 B x 2 + b 4 B x 1 = 10, less the edge a->b (1 B read by
    # b: 1 s) and a's output (1 B written by a: 2 s) = 7 s. max(4, 7) + .5 = 7.5; then c
    # (elementwise) max(1, 2 x 2) + .5 = 4.5 -> step 12.
    g = make_graph(
        [("a", 2, 3, 1, 0), ("b", 2, 4, 2, 0, "reduction"), ("c", 1, 2, 0.5, 0)],
        [("a", "b", 1), ("b", "c", 2)],
    )
    cluster = efficient_cluster({"elementwise": {"memory": 0.5}})
    m = simulate(g, cluster, Decision(fusion=np.array([1, 0, 0])), schedule=True)
    assert m.valid and [k.ops for k in m.schedule.kernels] == [(0, 1), (2,)]
    assert m.step_time == 12.0


def test_devices_differing_only_in_efficiency_get_their_own_times():
    g = make_graph([("a", 4, 0, 0, 0)], [])
    slow = Device("slow", "unit", 1.0, 1.0, 1e12, 0.0, efficiency={"elementwise": {"compute": 0.5}})
    fast = Device("fast", "unit", 1.0, 1.0, 1e12, 0.0)
    bw = np.full((2, 2), 1.0)
    cluster = Cluster("two", (slow, fast), bw, np.zeros((2, 2)))
    assert simulate(g, cluster, Decision(placement=np.array([0]))).step_time == 8.0
    assert simulate(g, cluster, Decision(placement=np.array([1]))).step_time == 4.0
