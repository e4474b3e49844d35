from __future__ import annotations

import bisect

import numpy as np
import pytest
from helpers_baselines import random_cluster, small_random_graphs

from graphopt.baselines.heft import (
    DEFAULT_MAX_GAPS,
    heft,
    heft_contention,
    heft_schedule,
    heft_schedule_from_costs,
    upward_rank,
)
from graphopt.baselines.placement import round_robin
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision

# Topcuoglu, Hariri and Wu (2002), Fig. 2: the sample task graph (tasks n1..n10, here 0..9) with
# the communication cost on each edge, and the table of computation costs on processors P1..P3.
PAPER_W = [
    [14, 16, 9],
    [13, 19, 18],
    [11, 13, 19],
    [13, 8, 17],
    [12, 13, 10],
    [13, 16, 9],
    [7, 15, 11],
    [5, 11, 14],
    [18, 12, 20],
    [21, 7, 16],
]
PAPER_EDGES = [
    (1, 2, 18),
    (1, 3, 12),
    (1, 4, 9),
    (1, 5, 11),
    (1, 6, 14),
    (2, 8, 19),
    (2, 9, 16),
    (3, 7, 23),
    (4, 8, 27),
    (4, 9, 23),
    (5, 9, 13),
    (6, 8, 15),
    (7, 10, 17),
    (8, 10, 11),
    (9, 10, 13),
]
# Table 2 of the paper: the upward ranks.
PAPER_RANKS = [108.0, 77.0, 80.0, 80.0, 69.0, 63.333, 42.667, 35.667, 44.333, 14.667]
# Fig. 3(a): HEFT's schedule, task -> (processor, start, finish); schedule length 80.
PAPER_SCHEDULE = {
    1: (3, 0, 9),
    2: (1, 27, 40),
    3: (3, 9, 28),
    4: (2, 18, 26),
    5: (3, 28, 38),
    6: (2, 26, 42),
    7: (3, 38, 49),
    8: (1, 57, 62),
    9: (2, 56, 68),
    10: (2, 73, 80),
}


def paper_edges() -> list[tuple[int, int, float]]:
    return [(a - 1, b - 1, float(c)) for a, b, c in PAPER_EDGES]


def test_paper_example_ranks_and_schedule_length():
    result = heft_schedule_from_costs(PAPER_W, paper_edges())
    np.testing.assert_allclose(result.rank, PAPER_RANKS, atol=5e-4)
    assert result.makespan == 80.0
    got = {
        i + 1: (int(result.placement[i]) + 1, result.start[i], result.finish[i]) for i in range(10)
    }
    assert got == PAPER_SCHEDULE
    # the scheduling order is by decreasing rank: n1 first, n10 last
    assert result.order[0] == 0 and result.order[-1] == 9
    # exhaustive gap search gives the same schedule on this small graph
    assert heft_schedule_from_costs(PAPER_W, paper_edges(), max_gaps=None).makespan == 80.0


def test_paper_example_through_compgraph_and_cluster():
    """The same example as a CompGraph (measured op times per processor kind, edge bytes = the
    communication cost) on a cluster with unit bandwidth and no latency: HEFT sees the same costs."""
    w = np.array(PAPER_W, dtype=float)
    ops = [
        Op(f"n{i + 1}", "Task", measured={f"P{p + 1}": w[i, p] for p in range(3)})
        for i in range(10)
    ]
    edges = [(f"n{a}", f"n{b}", float(c)) for a, b, c in PAPER_EDGES]
    graph = CompGraph.build("topcuoglu-fig2", ops, edges)
    devices = tuple(
        Device(
            f"P{p + 1}",
            f"P{p + 1}",
            peak_flops=1.0,
            mem_bandwidth=1.0,
            memory=1.0,
            launch_overhead=0.0,
        )
        for p in range(3)
    )
    cluster = Cluster("paper", devices, bandwidth=np.ones((3, 3)), latency=np.zeros((3, 3)))
    result = heft_schedule(graph, cluster)
    assert result.makespan == 80.0
    order = [graph.index[f"n{i + 1}"] for i in range(10)]
    np.testing.assert_allclose(result.rank[order], PAPER_RANKS, atol=5e-4)
    np.testing.assert_allclose(upward_rank(graph, cluster)[order], PAPER_RANKS, atol=5e-4)


# ---------------------------------------------------------------------------------- readable twin
def heft_reference(
    comp: list[list[float]],
    edges: list[tuple[int, int, float]],
    latency: list[list[float]],
    bandwidth: list[list[float]],
    max_gaps: int | None,
    contention: bool = False,
) -> tuple[list[int], list[float], list[float]]:
    """HEFT as the paper states it, in plain Python, with the same bounded gap search; with
    ``contention``, transfers queue on their links and a tensor is sent to a device once."""
    n, num_dev = len(comp), len(comp[0])
    succ: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    pred: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for s, d, b in sorted(edges):  # transfers into one op are booked in producer order
        succ[s].append((d, b))
        pred[d].append((s, b))
    links = [(p, q) for p in range(num_dev) for q in range(num_dev) if p != q]
    lat_mean, inv_bw_mean = 0.0, 0.0
    for p, q in links:
        lat_mean += latency[p][q]
        inv_bw_mean += 1.0 / bandwidth[p][q]
    if links:
        lat_mean, inv_bw_mean = lat_mean / len(links), inv_bw_mean / len(links)

    def mean_comm(data: float) -> float:
        return lat_mean + data * inv_bw_mean if num_dev > 1 else 0.0

    rank = [0.0] * n
    for i in reversed(range(n)):
        w_mean = 0.0
        for p in range(num_dev):
            w_mean += comp[i][p]
        best = 0.0
        for j, data in succ[i]:
            best = max(best, mean_comm(data) + rank[j])
        rank[i] = w_mean / num_dev + best
    order = sorted(range(n), key=lambda i: (-rank[i], i))

    busy: list[list[tuple[float, float]]] = [[] for _ in range(num_dev)]  # sorted (start, end)
    proc, start, finish = [-1] * n, [0.0] * n, [0.0] * n
    gaps_allowed = n + 1 if max_gaps is None else max_gaps
    link_free = {(q, p): 0.0 for q in range(num_dev) for p in range(num_dev)}
    sent: dict[tuple[int, int], float] = {}  # (producer, device) -> arrival of its copy

    def data_ready(v: int, p: int, book: bool) -> float:
        free = {q: link_free[q, p] for q in range(num_dev)}
        ready = 0.0
        for u, data in pred[v]:
            q = proc[u]
            arrival = finish[u]
            if q != p:
                cost = latency[q][p] + data / bandwidth[q][p]
                if not contention:
                    arrival += cost
                elif (u, p) in sent:
                    arrival = sent[u, p]
                else:
                    arrival = max(arrival, free[q]) + cost
                    free[q] = arrival
                    if book:
                        sent[u, p] = arrival
            ready = max(ready, arrival)
        if book:
            link_free.update({(q, p): t for q, t in free.items()})
        return ready

    for v in order:
        best_choice = None
        for p in range(num_dev):
            ready = data_ready(v, p, book=False)
            w = comp[v][p]
            starts = [s for s, _ in busy[p]]
            j = bisect.bisect_left(starts, ready)
            slot = None
            for k in range(j, min(len(starts), j + gaps_allowed)):
                begin = max(ready, busy[p][k - 1][1]) if k > 0 else ready
                if begin + w <= starts[k]:
                    slot = (begin, k)
                    break
            if slot is None:
                slot = (max(ready, busy[p][-1][1]) if busy[p] else ready, len(starts))
            eft = slot[0] + w
            if best_choice is None or eft < best_choice[0]:
                best_choice = (eft, p, slot)
        assert best_choice is not None
        eft, p, (begin, k) = best_choice
        if contention:
            data_ready(v, p, book=True)
        busy[p].insert(k, (begin, eft))
        proc[v], start[v], finish[v] = p, begin, eft
    return proc, start, finish


@pytest.mark.parametrize("contention", [False, True])
@pytest.mark.parametrize("max_gaps", [None, 0, 1, 3, DEFAULT_MAX_GAPS])
def test_fast_heft_agrees_with_readable_twin_on_random_costs(max_gaps, contention):
    rng = np.random.default_rng(7)
    for trial in range(15):
        n = int(rng.integers(2, 40))
        num_dev = int(rng.integers(1, 5))
        comp = rng.uniform(0.0, 10.0, (n, num_dev)).round(int(trial % 2))  # some exact ties
        edges = [
            (i, j, float(rng.uniform(0, 20)))
            for j in range(1, n)
            for i in rng.choice(j, size=min(j, int(rng.integers(1, 4))), replace=False)
        ]
        lat = rng.uniform(0, 1, (num_dev, num_dev))
        bw = rng.uniform(0.5, 3, (num_dev, num_dev))
        np.fill_diagonal(lat, 0.0)
        np.fill_diagonal(bw, np.inf)
        fast = heft_schedule_from_costs(
            comp, edges, latency=lat, bandwidth=bw, max_gaps=max_gaps, contention=contention
        )
        proc, start, finish = heft_reference(
            comp.tolist(), edges, lat.tolist(), bw.tolist(), max_gaps, contention
        )
        assert fast.placement.tolist() == proc
        assert fast.start.tolist() == start
        assert fast.finish.tolist() == finish


@pytest.mark.parametrize("contention", [False, True])
def test_fast_heft_agrees_with_twin_on_compgraphs(contention):
    for k, graph in enumerate(small_random_graphs(6)):
        cluster = random_cluster(2 + k % 3, seed=k)
        fast = heft_schedule(graph, cluster, contention=contention)
        comp = PreparedGraph(graph, cluster).op_time.tolist()
        edges = list(
            zip(
                graph.edge_src.tolist(),
                graph.edge_dst.tolist(),
                graph.edge_bytes.tolist(),
                strict=True,
            )
        )
        proc, start, finish = heft_reference(
            comp,
            edges,
            cluster.latency.tolist(),
            cluster.bandwidth.tolist(),
            DEFAULT_MAX_GAPS,
            contention,
        )
        assert fast.placement.tolist() == proc
        assert fast.start.tolist() == start and fast.finish.tolist() == finish


def test_schedule_is_feasible_under_heft_model():
    """Every task starts after its predecessors' data arrive and no processor runs two at once."""
    graph = small_random_graphs(1, low=80, high=81)[0]
    cluster = random_cluster(3, seed=5)
    s = heft_schedule(graph, cluster)
    comp = PreparedGraph(graph, cluster).op_time
    np.testing.assert_allclose(s.finish - s.start, comp[np.arange(graph.num_ops), s.placement])
    for u, v, b in zip(graph.edge_src, graph.edge_dst, graph.edge_bytes, strict=True):
        p, q = s.placement[u], s.placement[v]
        comm = 0.0 if p == q else cluster.latency[p, q] + b / cluster.bandwidth[p, q]
        assert s.start[v] >= s.finish[u] + comm - 1e-15
    for p in range(cluster.num_devices):
        ops = np.flatnonzero(s.placement == p)
        ops = ops[np.argsort(s.start[ops])]
        assert np.all(s.start[ops][1:] >= s.finish[ops][:-1])
    assert s.makespan == s.finish.max()


@pytest.mark.parametrize("placer", [heft, heft_contention])
def test_heft_beats_round_robin_on_most_random_graphs(placer):
    wins = 0
    for k, graph in enumerate(small_random_graphs(20)):
        cluster = random_cluster(2 + k % 3, seed=10 + k)
        prepared = PreparedGraph(graph, cluster)
        t_heft = prepared.evaluate(Decision(placement=placer(graph, cluster))).step_time
        t_rr = prepared.evaluate(Decision(placement=round_robin(graph, cluster))).step_time
        wins += t_heft < t_rr
    assert wins >= 16  # 20 of 20 at the time of writing


def test_contention_model_sends_each_tensor_once_and_queues_links():
    """Producers 0 and 1 run on P0; consumers 2 and 3 are pinned to P1 by their costs. Without
    contention both copies to P1 travel at once; with it the second waits for the first, and op 3
    reuses the copy of op 1 that op 2 already brought to P1."""
    big = 1e9
    comp = [[1.0, big], [1.0, big], [big, 1.0], [big, 1.0]]
    edges = [(0, 2, 4.0), (1, 2, 4.0), (1, 3, 4.0)]
    plain = heft_schedule_from_costs(comp, edges)
    queued = heft_schedule_from_costs(comp, edges, contention=True)
    assert plain.placement.tolist() == queued.placement.tolist() == [0, 0, 1, 1]
    # ops 0 and 1 run on P0 over [0, 1] and [1, 2]; copies take 4
    assert plain.start[2] == 6.0  # both copies at once: 2 + 4
    assert queued.start[2] == 9.0  # 0's copy over [1, 5], then 1's over [5, 9]
    assert queued.start[3] == 10.0  # reuses 1's copy (at 9); P1 busy until 10


def test_deterministic_and_edge_cases():
    graph = small_random_graphs(1)[0]
    cluster = random_cluster(3, seed=0)
    assert np.array_equal(heft(graph, cluster), heft(graph, cluster))
    empty = heft_schedule_from_costs(np.zeros((0, 2)), [])
    assert empty.makespan == 0.0 and empty.placement.shape == (0,)
    one = heft_schedule_from_costs([[3.0, 1.0]], [])
    assert one.placement.tolist() == [1] and one.makespan == 1.0


def test_bad_inputs_are_explained():
    with pytest.raises(ValueError, match="topological"):
        heft_schedule_from_costs([[1.0], [1.0]], [(1, 0, 1.0)])
    with pytest.raises(ValueError, match="duplicate edge"):
        heft_schedule_from_costs([[1.0], [1.0]], [(0, 1, 1.0), (0, 1, 2.0)])
    with pytest.raises(ValueError, match="shape"):
        heft_schedule_from_costs([1.0, 2.0], [])
    with pytest.raises(ValueError, match="max_gaps"):
        heft_schedule_from_costs([[1.0]], [], max_gaps=-1)
