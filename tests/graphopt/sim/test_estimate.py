"""The analytic schedule estimates: the insertion schedule, the append-only one, the
out-of-memory rule of parameters, and the estimate as a cost model."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.costmodel.features import DecisionFeaturizer
from graphopt.graph import CompGraph, Op
from graphopt.hardware import get_cluster
from graphopt.sim.estimate import EstimateCostModel, PlacementEstimate
from graphopt.typing import CostModel, Decision
from graphopt.workloads import get_graph


@pytest.fixture(scope="module")
def setting():
    return get_graph("random-layered-200-s3"), get_cluster("v100-nvlink-4")


def test_estimate_is_the_insertion_schedule_and_refuses_overfull_devices(setting):
    graph, cluster = setting
    rng = np.random.default_rng(0)
    places = rng.integers(0, cluster.num_devices, (5, graph.num_ops))
    est = PlacementEstimate(graph, cluster)(places)
    expected = DecisionFeaturizer(graph, cluster).insertion_schedule(places)
    np.testing.assert_array_equal(est, expected)
    per_op = 0.4 * float(cluster.memory.min())  # two ops fit on a device, three do not
    ops = [Op(f"op{i}", "matmul", flops=1e9, param_bytes=per_op) for i in range(8)]
    chain = CompGraph.build("heavy", ops, [(f"op{i}", f"op{i + 1}", 1e6) for i in range(7)])
    tight = PlacementEstimate(chain, cluster)
    spread = np.arange(8) % cluster.num_devices
    crowded = np.zeros(8, dtype=np.int64)
    out = tight(np.stack([spread, crowded]))
    assert np.isfinite(out[0]) and np.isinf(out[1])


def test_window_zero_appends_where_the_insertion_schedule_fills_a_gap():
    cluster = get_cluster("v100-nvlink-4")
    ops = [Op("a", "matmul", flops=1e12), Op("b", "matmul", flops=1e9), Op("d", "add", flops=1e9)]
    graph = CompGraph.build("gap", ops, [("a", "b", 1e3)])
    place = np.array([[1, 0, 0]])  # b waits for a on device 0; d could run meanwhile
    insert = PlacementEstimate(graph, cluster)(place)[0]
    append = PlacementEstimate(graph, cluster, window=0)(place)[0]
    alone = PlacementEstimate(graph, cluster)(np.array([[1, 0, 2]]))[0]
    assert insert == pytest.approx(alone)  # d hides in the gap before b
    assert append > insert  # appended after b instead
    with pytest.raises(ValueError, match="window must be >= 0"):
        PlacementEstimate(graph, cluster, window=-1)


def test_estimate_cost_model(setting):
    graph, cluster = setting
    model = EstimateCostModel()
    assert isinstance(model, CostModel)
    place = np.arange(graph.num_ops) % cluster.num_devices
    m = model.evaluate(graph, cluster, Decision(placement=place))
    assert m.valid and m.step_time == PlacementEstimate(graph, cluster)(place[None])[0]
    single = model.evaluate(graph, cluster, Decision())
    assert single.step_time == PlacementEstimate(graph, cluster)(np.zeros((1, graph.num_ops)))[0]
    per_op = 0.6 * float(cluster.memory.min())
    heavy = CompGraph.build(
        "heavy", [Op(f"op{i}", "matmul", flops=1e9, param_bytes=per_op) for i in range(2)], []
    )
    oom = model.evaluate(heavy, cluster, Decision())
    assert not oom.valid and "out of memory" in oom.reason


# ------------------------------------------------------------------ the cluster's link model
def _book_twin(busy: list[tuple[float, float]], ready: float, duration: float, window: int):
    """Earliest gap at or after ``ready`` before one of the last ``window`` intervals, else after
    the last (``busy`` sorted by start)."""
    lo = max(0, len(busy) - window)
    prev = busy[lo - 1][1] if lo > 0 else 0.0
    for i in range(lo, len(busy)):
        if max(ready, prev) + duration <= busy[i][0]:
            begin = max(ready, prev)
            busy.insert(i, (begin, begin + duration))
            return begin + duration
        prev = busy[i][1]
    begin = max(ready, busy[-1][1]) if busy else ready
    busy.append((begin, begin + duration))
    return begin + duration


def _schedule_twin(graph, cluster, op_time, place, window: int) -> float:
    """The readable twin of ``contention_schedule`` under the cluster's link model."""
    busy: dict[object, list[tuple[float, float]]] = {}
    queued, host = cluster.contention == "link", cluster.host_index
    arrive = np.zeros(graph.num_ops)

    def send(src: int, dst: int, ready: float, nbytes: float) -> float:
        seconds = cluster.latency[src, dst] + nbytes / cluster.bandwidth[src, dst]
        if not queued:
            return ready + seconds
        return _book_twin(busy.setdefault((src, dst), []), ready, seconds, window)

    length = 0.0
    for v in range(graph.num_ops):
        d = int(place[v])
        finish = _book_twin(busy.setdefault(d, []), arrive[v], op_time[v, d], window)
        length = max(length, finish)
        out_edges = np.flatnonzero(graph.edge_src == v)
        relayed = host >= 0 and d != host
        if cluster.send == "per-consumer":
            for e in out_edges:
                w, nbytes = int(graph.edge_dst[e]), float(graph.edge_bytes[e])
                t = int(place[w])
                if t == d:
                    land = finish
                elif relayed and t != host:
                    land = send(host, t, send(d, host, finish, nbytes), nbytes)
                else:
                    land = send(d, t, finish, nbytes)
                arrive[w] = max(arrive[w], land)
            continue
        largest: dict[int, float] = {}
        for e in out_edges:
            t = int(place[graph.edge_dst[e]])
            if t != d:
                largest[t] = max(largest.get(t, 0.0), float(graph.edge_bytes[e]))
        landed: dict[int, float] = {}
        if relayed and largest:
            up = send(d, host, finish, max(largest.values()))
            for t in sorted(largest):
                landed[t] = up if t == host else send(host, t, up, largest[t])
        else:
            for t in sorted(largest):
                landed[t] = send(d, t, finish, largest[t])
        for e in out_edges:
            w = int(graph.edge_dst[e])
            arrive[w] = max(arrive[w], finish if place[w] == d else landed[int(place[w])])
    return length


def _with_options(cluster, **options):
    from dataclasses import replace

    return replace(cluster, **options)


@pytest.mark.parametrize("window", [0, 3, 64])
@pytest.mark.parametrize("contention", ["link", "none"])
@pytest.mark.parametrize("route", ["direct", "via-host"])
@pytest.mark.parametrize("send", ["per-device", "per-consumer"])
def test_estimate_matches_its_twin_under_every_link_model(window, contention, route, send):
    base = get_cluster("hetero-cpu-2gpu")
    host = "cpu0" if route == "via-host" else None
    cluster = _with_options(base, contention=contention, route=route, host=host, send=send)
    for seed in range(3):
        graph = get_graph(f"random-layered-{40 + 20 * seed}-s{seed}")
        place = np.random.default_rng(seed).integers(0, cluster.num_devices, (4, graph.num_ops))
        place[3] = np.arange(graph.num_ops) % 2 + 1  # only the two GPUs: every send relayed
        estimate = PlacementEstimate(graph, cluster, window)
        fast = estimate.schedule(place)
        for b in range(len(place)):
            twin = _schedule_twin(graph, cluster, estimate.op_time, place[b], window)
            assert fast[b] == pytest.approx(twin, rel=1e-9), (seed, b)
    if (contention, route, send) == ("link", "direct", "per-device"):  # the default: unchanged
        assert cluster == base


@pytest.mark.parametrize("window", [1, 2, 5, 1000])
def test_small_windows_give_the_twins_answers(window):
    """Small windows make the fast version drop old intervals from its rows: same answers."""
    graph, cluster = get_graph("random-sp-100-s0"), get_cluster("v100-nvlink-4")
    place = np.random.default_rng(window).integers(4, size=(3, graph.num_ops))
    place[2, : graph.num_ops // 2] = 1  # long runs on one device: many gaps to search
    estimate = PlacementEstimate(graph, cluster, window)
    fast = estimate.schedule(place)
    for b in range(3):
        twin = _schedule_twin(graph, cluster, estimate.op_time, place[b], window)
        assert fast[b] == pytest.approx(twin, rel=1e-9)


def test_link_model_by_hand():
    """a -> b and a -> c, 1e6 bytes each, a on gpu0, b and c on gpu1 (hetero-cpu-2gpu)."""
    ops = [Op(n, "matmul", flops=1e9) for n in "abc"]
    graph = CompGraph.build("fork", ops, [("a", "b", 1e6), ("a", "c", 1e6)])
    base = get_cluster("hetero-cpu-2gpu")  # cpu0, gpu0, gpu1
    place = np.array([[1, 2, 2]])
    t = PlacementEstimate(graph, base).op_time
    lat, bw = base.latency, base.bandwidth

    def hop(s: int, d: int) -> float:
        return float(lat[s, d] + 1e6 / bw[s, d])

    a_end = t[0, 1]
    # per device: one send gpu0 -> gpu1, then b and c one after the other on gpu1
    direct = PlacementEstimate(graph, base)(place)[0]
    assert direct == pytest.approx(a_end + hop(1, 2) + t[1, 2] + t[2, 2])
    # per consumer, queued: the second send waits for the first; c starts when it lands
    two = _with_options(base, send="per-consumer")
    assert PlacementEstimate(graph, two)(place)[0] == pytest.approx(
        max(a_end + hop(1, 2) + t[1, 2], a_end + 2 * hop(1, 2)) + t[2, 2]
    )
    # per consumer, no contention: both land at once
    free = _with_options(base, send="per-consumer", contention="none")
    assert PlacementEstimate(graph, free)(place)[0] == pytest.approx(direct)
    # via the host: gpu0 -> cpu0 -> gpu1
    relay = _with_options(base, route="via-host")
    assert PlacementEstimate(graph, relay)(place)[0] == pytest.approx(
        a_end + hop(1, 0) + hop(0, 2) + t[1, 2] + t[2, 2]
    )
