"""Hand-worked cases of the cluster's model options (rules 5, 6 and 8 of :mod:`graphopt.sim`):
``contention``, ``route``, ``send``, ``copies`` and ``dispatch``. Every expected number below is derived in
the comment above it; the engine and its twin must both give it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import make_graph, unit_cluster
from reference import simulate_reference

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.sim import PreparedGraph, simulate
from graphopt.typing import Decision, Measurement


def both(graph: CompGraph, cluster: Cluster, decision: Decision) -> Measurement:
    """The engine's measurement, after checking that the twin agrees on the step time, the
    bytes moved and the peak memory."""
    m = simulate(graph, cluster, decision, schedule=True)
    ref = simulate_reference(graph, cluster, decision)
    assert m.step_time == ref.step_time
    assert m.bytes_moved == pytest.approx(ref.bytes_moved, rel=1e-12)
    np.testing.assert_allclose(m.peak_memory, ref.peak_memory, rtol=1e-12)
    return m


def sends(m: Measurement, graph: CompGraph) -> list[tuple[str, int, int, float, float]]:
    """``(producer, src, dst, start, end)`` of every transfer, by start, then end."""
    assert m.schedule is not None
    rows = [
        (graph.op_names[t.producer], t.src, t.dst, round(t.start, 9), round(t.end, 9))
        for t in m.schedule.transfers
    ]
    return sorted(rows, key=lambda row: (row[3], row[4]))


def host_cluster(**options: str) -> Cluster:
    """A host ``cpu`` (device 0, kind CPU) and two accelerators, 1 FLOP/s each, every link
    10 B/s with 0.5 s latency."""
    devices = tuple(
        Device(name=name, kind=kind, peak_flops=1.0, mem_bandwidth=1e30, memory=1e12,
               launch_overhead=0.0)
        for name, kind in (("cpu", "CPU"), ("acc1", "acc"), ("acc2", "acc"))
    )  # fmt: skip
    bw, lat = np.full((3, 3), 10.0), np.full((3, 3), 0.5)
    return Cluster("host3", devices, bw, lat, **options)


# ------------------------------------------------------------------------------- contention
def test_without_contention_transfers_share_a_link():
    # p [0,1], q [1,2] on dev0; p -> r, q -> s on dev1; no latency, 10 B/s.
    # contention: link (rule 5d): p's 30 B run [1,4]; q's 10 B wait for the link: [4,5];
    #   r [4,5], s [5,6] -> step 6.
    # contention: none: q's 10 B start when q ends: [2,3], beside p's [1,4] on the same link;
    #   s is ready at 3: s [3,4]; r [4,5] -> step 5.
    g = make_graph(
        [("p", 1, 0, 30, 0), ("q", 1, 0, 10, 0), ("r", 1, 0, 1, 0), ("s", 1, 0, 1, 0)],
        [("p", "r", 30), ("q", "s", 10)],
    )
    assert g.op_names == ("p", "q", "r", "s")
    decision = Decision(placement=np.array([0, 0, 1, 1]))
    link = unit_cluster(2, latency=0.0)
    m = both(g, link, decision)
    assert m.step_time == 6.0
    assert sends(m, g) == [("p", 0, 1, 1.0, 4.0), ("q", 0, 1, 4.0, 5.0)]
    m = both(g, dataclasses.replace(link, contention="none"), decision)
    assert m.step_time == 5.0
    assert sends(m, g) == [("p", 0, 1, 1.0, 4.0), ("q", 0, 1, 2.0, 3.0)]
    assert m.bytes_moved == 40.0


# ------------------------------------------------------------------------------------- send
def test_one_send_per_consumer():
    # a on dev0 feeds b (8 B) and c (4 B), both on dev1; links 0.5 s + bytes / 10 B/s.
    # per-device (rule 5a): one 8 B transfer, 0.5 + 0.8 = 1.3 s: [1, 2.3]; b [2.3, 3.3],
    #   c [3.3, 4.3] -> step 4.3, 8 B moved.
    #   dev1 memory: the 8 B copy [1, 4.3) (until c ends); b's 1 B output [2.3, 3.3), c's
    #   [3.3, 4.3) (graph outputs) -> peak 9.
    # per-consumer: b's 8 B [1, 2.3], then c's 4 B (0.9 s) waits for the link: [2.3, 3.2];
    #   b [2.3, 3.3], c [3.3, 4.3] -> step 4.3, 12 B moved.
    #   dev1 memory: b's copy 8 B [1, 3.3), c's copy 4 B [2.3, 4.3), b's output [2.3, 3.3),
    #   c's [3.3, 4.3): at 2.3, 8 + 4 + 1 = 13 -> peak 13.
    # per-consumer without contention: c's 4 B run beside b's: [1, 1.9]; c [1.9, 2.9], b is
    #   ready at 2.3 but waits for the device: b [2.9, 3.9] -> step 3.9.
    g = make_graph(
        [("a", 1, 0, 8, 0), ("b", 1, 0, 1, 0), ("c", 1, 0, 1, 0)], [("a", "b", 8), ("a", "c", 4)]
    )
    decision = Decision(placement=np.array([0, 1, 1]))
    per_device = unit_cluster(2)
    m = both(g, per_device, decision)
    assert m.step_time == pytest.approx(4.3, abs=1e-12) and m.bytes_moved == 8.0
    assert m.peak_memory[1] == 9.0
    per_consumer = dataclasses.replace(per_device, send="per-consumer")
    m = both(g, per_consumer, decision)
    assert m.step_time == pytest.approx(4.3, abs=1e-12) and m.bytes_moved == 12.0
    assert sends(m, g) == [("a", 0, 1, 1.0, 2.3), ("a", 0, 1, 2.3, 3.2)]
    assert m.peak_memory[1] == 13.0
    m = both(g, dataclasses.replace(per_consumer, contention="none"), decision)
    assert m.step_time == pytest.approx(3.9, abs=1e-12)
    assert sends(m, g) == [("a", 0, 1, 1.0, 1.9), ("a", 0, 1, 1.0, 2.3)]


# ------------------------------------------------------------------------------------ route
def test_via_host_per_device_shares_the_first_hop():
    # a on acc1 feeds b (10 B) on acc2 and c (4 B) on the host cpu; 1 FLOP each, every op's
    # output 1 B but a's 10 B; links 0.5 s + bytes / 10 B/s.
    # direct: acc1 -> acc2 10 B [1, 2.5] and acc1 -> cpu 4 B [1, 1.9] on two links;
    #   b [2.5, 3.5], c [1.9, 2.9] -> step 3.5, 14 B moved.
    # via-host (rule 5b), per device: a's one send to the host carries the larger edge, 10 B:
    #   acc1 -> cpu [1, 2.5]; then c [2.5, 3.5] and the second hop cpu -> acc2 10 B [2.5, 4];
    #   b [4, 5] -> step 5, 20 B moved.
    #   cpu memory (rule 8): the relayed copy 10 B [1, 4) (until c ends at 3.5 and the second
    #   hop arrives at 4), c's output 1 B [2.5, 3.5) -> peak 11.
    g = make_graph(
        [("a", 1, 0, 10, 0), ("b", 1, 0, 1, 0), ("c", 1, 0, 1, 0)],
        [("a", "b", 10), ("a", "c", 4)],
    )
    decision = Decision(placement=np.array([1, 2, 0]))
    m = both(g, host_cluster(), decision)
    assert m.step_time == 3.5 and m.bytes_moved == 14.0
    via = host_cluster(route="via-host")
    assert via.host == "cpu" and via.host_index == 0  # the first device of kind CPU
    m = both(g, via, decision)
    assert m.step_time == 5.0 and m.bytes_moved == 20.0
    assert sends(m, g) == [("a", 1, 0, 1.0, 2.5), ("a", 0, 2, 2.5, 4.0)]
    assert m.peak_memory[0] == 11.0
    # copies: free (rule 8): the relayed and received copies use no memory: cpu holds c's
    # output only (1 B), acc2 b's (1 B); the step time does not change.
    m = both(g, host_cluster(route="via-host", copies="free"), decision)
    assert m.step_time == 5.0 and m.peak_memory.tolist() == [1.0, 10.0, 1.0]


def test_via_host_per_consumer_sends_each_edge_on_its_own():
    # The graph above, per consumer: b's send is relayed, c's is direct to the host, both on the
    # link acc1 -> cpu, in consumer order (b before c, rule 5d):
    #   b's first hop 10 B [1, 2.5], c's 4 B [2.5, 3.4]; b's second hop cpu -> acc2 [2.5, 4];
    #   c [3.4, 4.4], b [4, 5] -> step 5, 24 B moved.
    # Without contention c's 4 B run beside b's first hop: [1, 1.9]; c [1.9, 2.9]; b [4, 5].
    g = make_graph(
        [("a", 1, 0, 10, 0), ("b", 1, 0, 1, 0), ("c", 1, 0, 1, 0)],
        [("a", "b", 10), ("a", "c", 4)],
    )
    assert g.op_names == ("a", "b", "c")
    decision = Decision(placement=np.array([1, 2, 0]))
    m = both(g, host_cluster(route="via-host", send="per-consumer"), decision)
    assert m.step_time == 5.0 and m.bytes_moved == 24.0
    assert sends(m, g) == [("a", 1, 0, 1.0, 2.5), ("a", 1, 0, 2.5, 3.4), ("a", 0, 2, 2.5, 4.0)]
    m = both(g, host_cluster(route="via-host", send="per-consumer", contention="none"), decision)
    assert m.step_time == 5.0
    assert sends(m, g) == [("a", 1, 0, 1.0, 1.9), ("a", 1, 0, 1.0, 2.5), ("a", 0, 2, 2.5, 4.0)]


def test_via_host_leaves_transfers_from_the_host_direct():
    # a on the host cpu feeds b on acc1: one hop cpu -> acc1, 10 B [1, 2.5]; b [2.5, 3.5].
    g = make_graph([("a", 1, 0, 10, 0), ("b", 1, 0, 1, 0)], [("a", "b", 10)])
    m = both(g, host_cluster(route="via-host"), Decision(placement=np.array([0, 1])))
    assert m.step_time == 3.5 and sends(m, g) == [("a", 0, 1, 1.0, 2.5)]


def test_named_host():
    # host: acc2 relays instead of the CPU: a on acc1 -> b on cpu goes acc1 -> acc2 -> cpu,
    # 10 B per hop: [1, 2.5], [2.5, 4]; b [4, 5].
    g = make_graph([("a", 1, 0, 10, 0), ("b", 1, 0, 1, 0)], [("a", "b", 10)])
    m = both(g, host_cluster(route="via-host", host="acc2"), Decision(placement=np.array([1, 0])))
    assert m.step_time == 5.0
    assert sends(m, g) == [("a", 1, 2, 1.0, 2.5), ("a", 2, 0, 2.5, 4.0)]


# ----------------------------------------------------------------------------------- copies
def test_free_copies_use_no_memory():
    # The diamond of test_simulator: a(dev0) -> b(dev0) -> d(dev0); a -> c(dev1) -> d.
    # charged: peaks [26, 30] (worked out there). free: dev0 holds a 10 B [0, 3.5), b 5 B
    # [1, 7) and d 1 B [6, 7), not c's 20 B copy: peak 15 at 1; dev1 holds c's 20 B, not a's
    # copy: peak 20. Times do not change: step 7.
    g = make_graph(
        [("a", 1, 0, 10, 0), ("b", 2, 0, 5, 0), ("c", 1, 0, 20, 0), ("d", 1, 0, 1, 0)],
        [("a", "b", 10), ("a", "c", 10), ("b", "d", 5), ("c", "d", 20)],
    )
    decision = Decision(placement=np.array([0, 0, 1, 0]))
    assert both(g, unit_cluster(2), decision).peak_memory.tolist() == [26.0, 30.0]
    m = both(g, dataclasses.replace(unit_cluster(2), copies="free"), decision)
    assert m.step_time == 7.0 and m.bytes_moved == 30.0
    assert m.peak_memory.tolist() == [15.0, 20.0]
    # ... which can turn an out-of-memory decision into a valid one
    tight = unit_cluster(2, memory=25.0)
    assert not simulate(g, tight, decision).valid
    assert simulate(g, dataclasses.replace(tight, copies="free"), decision).valid


# --------------------------------------------------------------------------------- dispatch
def fcfs_case() -> tuple[CompGraph, Decision]:
    """a (1 s), e (2 s) and f (3 s) on dev0; b (4 s), c (2 s) and d (1 s) on dev1; edges
    a -> d, e -> c, d -> f of 0 B, so every transfer takes the 0.5 s latency."""
    g = make_graph(
        [("a", 1, 0, 0, 0), ("b", 4, 0, 0, 0), ("e", 2, 0, 0, 0), ("c", 2, 0, 0, 0),
         ("d", 1, 0, 0, 0), ("f", 3, 0, 0, 0)],
        [("a", "d", 0), ("e", "c", 0), ("d", "f", 0)],
    )  # fmt: skip
    assert g.op_names == ("a", "b", "e", "c", "d", "f")
    return g, Decision(placement=np.array([0, 1, 0, 1, 1, 0]))


def test_fcfs_dispatch_starts_the_kernel_ready_first():
    # dev0: a [0, 1], e [1, 3]; dev1: b [0, 4]. a -> d arrives at 1.5, e -> c at 3.5: when b
    # ends at 4, dev1 holds c (index 3, ready 3.5) and d (index 4, ready 1.5).
    # priority (rule 6, all priorities 0): c [4, 6], d [6, 7]; d -> f [7, 7.5]; f [7.5, 10.5]
    #   -> step 10.5.
    # fcfs: d [4, 5], c [5, 7]; d -> f [5, 5.5]; f [5.5, 8.5] -> step 8.5, whatever the
    #   priorities say (c's 0 before d's 9 changes nothing).
    g, decision = fcfs_case()
    cluster = unit_cluster(2, latency=0.5)
    m = both(g, cluster, decision)
    assert m.step_time == 10.5
    fcfs = dataclasses.replace(cluster, dispatch="fcfs")
    for priority in (None, np.array([0, 0, 0, 0, 9, 0])):
        m = both(g, fcfs, Decision(decision.placement, priority))
        assert m.step_time == 8.5
        assert m.schedule is not None
        starts = {g.op_names[k.ops[-1]]: k.start for k in m.schedule.kernels}
        assert starts == {"a": 0.0, "b": 0.0, "e": 1.0, "d": 4.0, "c": 5.0, "f": 5.5}
    # the same order under priority dispatch needs d's priority below c's
    m = both(g, cluster, Decision(decision.placement, np.array([0, 0, 0, 1, 0, 0])))
    assert m.step_time == 8.5


def test_fcfs_dispatch_breaks_ties_by_index():
    # x (index 0) feeds y (index 1) and z (index 2) on dev1, all 1 s, edges 0 B: one send per
    # device, so y and z are ready at the same instant (1.5); the lower index runs first, even
    # with priorities the other way round: y [1.5, 2.5], z [2.5, 3.5].
    g = make_graph(
        [("x", 1, 0, 0, 0), ("y", 1, 0, 0, 0), ("z", 1, 0, 0, 0)], [("x", "y", 0), ("x", "z", 0)]
    )
    cluster = dataclasses.replace(unit_cluster(2, latency=0.5), dispatch="fcfs")
    m = both(g, cluster, Decision(placement=np.array([0, 1, 1]), priority=np.array([0, 5, 0])))
    assert m.schedule is not None
    starts = {g.op_names[k.ops[-1]]: k.start for k in m.schedule.kernels}
    assert starts == {"x": 0.0, "y": 1.5, "z": 2.5} and m.step_time == 3.5


def test_batches_use_the_model_options_too():
    # evaluate_batch runs the same engine: each row equals evaluate under every option at once
    g = make_graph(
        [("a", 1, 0, 10, 0), ("b", 1, 0, 1, 0), ("c", 1, 0, 1, 0)],
        [("a", "b", 10), ("a", "c", 4)],
    )
    cluster = host_cluster(
        contention="none", route="via-host", send="per-consumer", copies="free", dispatch="fcfs"
    )
    prepared = PreparedGraph(g, cluster)
    placements = np.array([[1, 2, 0], [0, 1, 2], [2, 2, 1]])
    priorities = np.array([[0, 1, 2], [2, 1, 0], [1, 0, 1]])
    batch = prepared.evaluate_batch(placements, priorities)
    for row, placement in enumerate(placements):
        m = prepared.evaluate(Decision(placement=placement, priority=priorities[row]))
        assert batch.step_time[row] == m.step_time and batch.bytes_moved[row] == m.bytes_moved
        np.testing.assert_array_equal(batch.peak_memory[row], m.peak_memory)
