"""Decision features against per-op twins written with plain loops."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodel.features import (
    DECISION_FEATURES,
    SUMMARY_FEATURES,
    DecisionFeaturizer,
    static_features,
)
from graphopt.encoding import MAX_DEVICES
from graphopt.hardware import get_cluster
from graphopt.workloads.registry import resolve_graphs


def _features_reference(f: DecisionFeaturizer, place, prio, fuse) -> np.ndarray:
    """One decision, op by op, edge by edge."""
    g, n = f.graph, f.graph.num_ops
    out = np.zeros((n, len(DECISION_FEATURES)))
    loads = {}
    for v in range(n):
        loads[place[v]] = loads.get(place[v], 0.0) + f.op_time[v, place[v]]
    top = max(int(prio.max()), 1)
    for v in range(n):
        d = place[v]
        t = f.op_time[v, d]
        out[v, d] = 1.0
        out[v, MAX_DEVICES : MAX_DEVICES + 5] = [
            np.log10(1 + t * 1e6) / 7,
            t / f.mean,
            loads[d] / f.total,
            prio[v] / top,
            fuse[v],
        ]
    cin, cout, ccount, ctime, indeg = (np.zeros(n) for _ in range(5))
    for e in range(g.num_edges):
        u, v, b = g.edge_src[e], g.edge_dst[e], g.edge_bytes[e]
        indeg[v] += 1
        if place[u] != place[v]:
            cin[v] += b
            cout[u] += b
            ccount[v] += 1
            bw = f.cluster.bandwidth[place[u], place[v]]
            ctime[v] += f.cluster.latency[place[u], place[v]] + b / bw
    c = MAX_DEVICES + 5
    out[:, c] = np.log10(1 + cin) / 10
    out[:, c + 1] = np.log10(1 + cout) / 10
    out[:, c + 2] = ccount / np.maximum(indeg, 1)
    out[:, c + 3] = ctime / f.mean
    return out


def _inputs_arrived(f: DecisionFeaturizer, place, finish, v: int) -> float:
    """When the last input of op ``v`` arrives: each producer's finish, plus latency and bytes
    over bandwidth when it sits on another device (no link queueing)."""
    g = f.graph
    ready = 0.0
    for e in np.flatnonzero(g.edge_dst == v):
        u = g.edge_src[e]
        t = finish[u]
        if place[u] != place[v]:
            bw = f.cluster.bandwidth[place[u], place[v]]
            t += f.cluster.latency[place[u], place[v]] + g.edge_bytes[e] / bw
        ready = max(ready, t)
    return ready


def _critical_path_reference(f: DecisionFeaturizer, place) -> float:
    finish = np.zeros(f.graph.num_ops)
    for v in range(f.graph.num_ops):
        finish[v] = _inputs_arrived(f, place, finish, v) + f.op_time[v, place[v]]
    return float(finish.max())


def _list_schedule_reference(f: DecisionFeaturizer, place) -> float:
    """Ops in topological order, each at max(inputs arrived, its device free)."""
    finish = np.zeros(f.graph.num_ops)
    free = {}
    for v in range(f.graph.num_ops):
        start = max(_inputs_arrived(f, place, finish, v), free.get(place[v], 0.0))
        finish[v] = start + f.op_time[v, place[v]]
        free[place[v]] = finish[v]
    return float(finish.max())


@pytest.fixture(scope="module")
def featurizer() -> DecisionFeaturizer:
    graph = resolve_graphs(["random-sp-100-s0"])[0]
    return DecisionFeaturizer(graph, get_cluster("v100-nvlink-4"))


def test_decision_features_match_per_op_reference(featurizer: DecisionFeaturizer) -> None:
    rng = np.random.default_rng(0)
    n = featurizer.graph.num_ops
    place = rng.integers(4, size=(5, n))
    prio = rng.integers(8, size=(5, n))
    fuse = rng.integers(2, size=(5, n))
    fast = featurizer(place, prio, fuse)
    assert fast.shape == (5, n, len(DECISION_FEATURES))
    for b in range(5):
        ref = _features_reference(featurizer, place[b], prio[b], fuse[b])
        np.testing.assert_allclose(fast[b], ref, rtol=1e-5, atol=1e-6)


def test_summary_matches_reference(featurizer: DecisionFeaturizer) -> None:
    rng = np.random.default_rng(1)
    n = featurizer.graph.num_ops
    place = rng.integers(4, size=(4, n))
    place[0] = 0  # one device: no transfers, critical path = longest compute path
    summary = featurizer.summary(place)
    assert summary.shape == (4, len(SUMMARY_FEATURES))
    col = SUMMARY_FEATURES.index("critical_path")
    listed = SUMMARY_FEATURES.index("list_schedule")
    booked = SUMMARY_FEATURES.index("contention_schedule")
    # the contention schedule itself is checked against its twin in tests/graphopt/sim
    contention = featurizer.estimate.schedule(place)
    for b in range(4):
        cp = _critical_path_reference(featurizer, place[b])
        assert summary[b, col] == pytest.approx(cp / featurizer.total, rel=1e-5)
        ls = _list_schedule_reference(featurizer, place[b])
        assert summary[b, listed] == pytest.approx(ls / featurizer.total, rel=1e-5)
        assert ls >= cp * (1 - 1e-9)  # device queueing only adds to the critical path
        assert summary[b, booked] == pytest.approx(contention[b] / featurizer.total, rel=1e-5)
        load = np.bincount(
            place[b], weights=featurizer.op_time[np.arange(n), place[b]], minlength=4
        )
        assert summary[b, 0] == pytest.approx(load.max() / featurizer.total, rel=1e-5)
    # one device, ops back to back: the list schedule is the total work
    assert summary[0, listed] == pytest.approx(summary[0, 0], rel=1e-5)
    assert summary[0, booked] == pytest.approx(summary[0, 0], rel=1e-5)
    assert summary[0, SUMMARY_FEATURES.index("transfer_time")] == 0.0
    assert summary[0, SUMMARY_FEATURES.index("max_link_load")] == 0.0
    assert summary[1, SUMMARY_FEATURES.index("max_link_load")] > 0.0


def test_contention_schedule_bounds(featurizer: DecisionFeaturizer) -> None:
    """A schedule is never shorter than the critical path (each transfer lasts at least as long
    as its edge's) or than the busiest device's work."""
    rng = np.random.default_rng(3)
    f = featurizer
    place = rng.integers(4, size=(8, f.graph.num_ops))
    summary = f.summary(place)
    booked = summary[:, SUMMARY_FEATURES.index("contention_schedule")]
    assert (booked >= summary[:, SUMMARY_FEATURES.index("critical_path")] * (1 - 1e-6)).all()
    assert (booked >= summary[:, SUMMARY_FEATURES.index("max_load")] * (1 - 1e-6)).all()


def test_static_features_shape_and_ids() -> None:
    graph = resolve_graphs(["rnnlm-tiny"])[0]
    feat, opcode = static_features(graph, get_cluster("v100-nvlink-2"))
    assert feat.shape == (graph.num_ops, 13)
    assert opcode.min() >= 1
    assert np.isfinite(feat).all()


def test_bad_decisions_are_rejected(featurizer: DecisionFeaturizer) -> None:
    n = featurizer.graph.num_ops
    with pytest.raises(ValueError, match="placement entries must lie in"):
        featurizer(np.full((1, n), 7))
    with pytest.raises(ValueError, match="expected"):
        featurizer(np.zeros((1, n)), np.zeros((2, n)))
    with pytest.raises(ValueError, match="at least one"):
        featurizer(None)
