"""Slack, waits and ready times of hand-worked schedules (each number derived above its assert),
and invariants on real graphs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_graph, unit_cluster

from graphopt.hardware import get_cluster
from graphopt.sim import simulate
from graphopt.sim.critical import schedule_times, timeline_times
from graphopt.typing import Decision, Schedule
from graphopt.workloads import resolve_graphs


def times_of(graph, cluster, decision):
    m = simulate(graph, cluster, decision, schedule=True)
    placement = decision.placement if decision.placement is not None else np.zeros(graph.num_ops)
    return schedule_times(graph, placement, m.schedule)


def test_chain_is_critical_and_never_waits():
    # a -> b -> c on one device: a [0,1], b [1,3], c [3,6]; each ready when its producer ends.
    g = make_graph(
        [("a", 1, 0, 1, 0), ("b", 2, 0, 1, 0), ("c", 3, 0, 1, 0)], [("a", "b", 1), ("b", "c", 1)]
    )
    t = times_of(g, unit_cluster(1), Decision())
    assert t.ready.tolist() == [0.0, 1.0, 3.0]
    assert t.wait.tolist() == [0.0, 0.0, 0.0]
    assert t.slack.tolist() == [0.0, 0.0, 0.0]
    assert t.critical().all() and t.step == 6.0


def test_fork_on_one_device_waits_in_priority_order():
    # a -> b (2 s), a -> c (3 s) on one device, topological ties: b [1,3], c [3,6].
    # c was ready at 1 and waited 2 s behind b; the device runs a, b, c back to back, so every
    # kernel is critical (the device order is a path of the realised schedule).
    g = make_graph(
        [("a", 1, 0, 1, 0), ("b", 2, 0, 1, 0), ("c", 3, 0, 1, 0)], [("a", "b", 1), ("a", "c", 1)]
    )
    t = times_of(g, unit_cluster(1), Decision())
    assert t.ready.tolist() == [0.0, 1.0, 1.0]
    assert t.wait.tolist() == [0.0, 0.0, 2.0]
    assert t.slack.tolist() == [0.0, 0.0, 0.0]


def test_short_branch_on_another_device_has_slack():
    # a(dev0) -> b(dev0, 4 s) -> d(dev0, 1 s); a -> c(dev1, 1 s) -> d. Links: 0.5 s + bytes/10.
    # a [0,1]; a->dev1 carries 1 B: [1, 1.6]; c [1.6, 2.6]; c->dev0 1 B: [2.6, 3.2];
    # b [1,5]; d [5,6]: step 6. c could end as late as 5 - 0.6 = 4.4, so it has 4.4 - 2.6 = 1.8 s
    # of slack; a, b, d are critical. c's output took 0.6 s to move; c was ready at 1.6.
    g = make_graph(
        [("a", 1, 0, 1, 0), ("b", 4, 0, 1, 0), ("c", 1, 0, 1, 0), ("d", 1, 0, 1, 0)],
        [("a", "b", 1), ("a", "c", 1), ("b", "d", 1), ("c", "d", 1)],
    )
    place = np.array([0, 0, 1, 0])
    t = times_of(g, unit_cluster(2), Decision(placement=place))
    c = g.index["c"]
    assert t.step == pytest.approx(6.0)
    assert t.ready[c] == pytest.approx(1.6)
    assert t.slack[c] == pytest.approx(1.8)
    others = [i for i in range(4) if i != c]
    assert t.slack[others] == pytest.approx([0.0, 0.0, 0.0])
    a = g.index["a"]
    assert t.transfer[a] == pytest.approx(0.6) and t.transfer[c] == pytest.approx(0.6)


def test_a_schedule_that_misses_ops_is_refused():
    g = make_graph([("a", 1, 0, 1, 0), ("b", 2, 0, 1, 0)], [("a", "b", 1)])
    m = simulate(g, unit_cluster(1), Decision(), schedule=True)
    partial = Schedule(kernels=m.schedule.kernels[:1], transfers=())
    with pytest.raises(ValueError, match="do not cover"):
        schedule_times(g, np.zeros(2, dtype=np.int64), partial)


@pytest.mark.parametrize("name", ["wavenet-tiny", "amoebanet-small"])
def test_invariants_on_real_graphs(name):
    # On a multi-device placement: no negative slack or wait, ready never after start, and a
    # critical path that starts at time 0 and ends at the step time.
    (g,) = resolve_graphs(name)
    cluster = get_cluster("v100-nvlink-4")
    rng = np.random.default_rng(0)
    place = rng.integers(0, 4, g.num_ops)
    t = times_of(g, cluster, Decision(placement=place))
    assert (t.slack >= 0).all() and (t.wait >= 0).all()
    assert (t.ready <= t.start + 1e-12).all()
    crit = t.critical(1e-9)
    assert t.start[crit].min() == 0.0
    assert t.end[crit].max() == pytest.approx(t.step)


@pytest.mark.parametrize("name", ["wavenet-tiny", "amoebanet-small"])
def test_the_timeline_arrays_and_the_records_and_the_twin_agree(name):
    # With the best heuristic's fusion (kernels of several ops) across 4 devices.
    from envs.reference import reference_decision
    from graphopt.sim import Simulator

    (g,) = resolve_graphs(name)
    cluster = get_cluster("v100-nvlink-4")
    sim = Simulator()
    decision = reference_decision(g, cluster, "fusion", sim).decision
    assert decision.fusion is not None and decision.fusion.any()
    prepared = sim.prepare(g, cluster)
    m, timeline = prepared.evaluate_timeline(decision)
    assert timeline is not None and m.valid
    assert m.step_time == prepared.evaluate(decision).step_time
    fast = timeline_times(g, decision.placement, timeline)
    twin = timeline_times(g, decision.placement, timeline, compiled=False)
    records = schedule_times(
        g, decision.placement, sim.evaluate(g, cluster, decision, schedule=True).schedule
    )
    for field in ("start", "end", "ready", "slack", "transfer", "root"):
        assert np.array_equal(getattr(fast, field), getattr(twin, field)), field
        assert np.allclose(getattr(fast, field), getattr(records, field), rtol=0, atol=1e-15), field
    assert fast.step == pytest.approx(m.step_time)


def test_an_illegal_fusion_has_no_timeline():
    g = make_graph([("a", 1, 0, 1, 0), ("b", 2, 0, 1, 0)], [("a", "b", 1)])
    from graphopt.sim import PreparedGraph

    prepared = PreparedGraph(g, unit_cluster(2))
    m, timeline = prepared.evaluate_timeline(
        Decision(placement=np.array([0, 1]), fusion=np.array([1, 0]))
    )
    assert timeline is None and not m.valid and "illegal fusion" in m.reason
