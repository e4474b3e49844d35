"""HEFT-lc under the cluster's link model (``contention``, ``route``, ``send``): the compiled
schedule (:func:`graphopt.sim.links.modelled_ready` in :func:`graphopt.baselines.heft.list_schedule`)
against a readable twin, and hand-worked cases."""

from __future__ import annotations

import bisect
import dataclasses
import itertools

import pytest
from helpers_baselines import random_cluster, small_random_graphs

from graphopt.baselines.heft import heft_schedule, upward_rank
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph

LINK_MODELS = list(
    itertools.product(("link", "none"), ("direct", "via-host"), ("per-device", "per-consumer"))
)


def with_options(cluster: Cluster, contention: str, route: str, send: str) -> Cluster:
    """``cluster`` under the given link options (its first device the host under via-host)."""
    host = cluster.devices[0].name if route == "via-host" else None
    return dataclasses.replace(cluster, contention=contention, route=route, host=host, send=send)


def heft_lc_reference(graph: CompGraph, cluster: Cluster) -> tuple[list[int], list[float]]:
    """HEFT-lc in plain Python under the cluster's link model: ops by decreasing upward rank
    (ties by index), each on the device of earliest finish (exhaustive gap search); an input
    from another device is sent after its producer ends, queued behind the link's earlier
    transfers under ``contention: link``, through the host in two hops between non-host devices
    under ``via-host``, and sent once per device (the host's copy shared by relayed sends) under
    ``per-device``. Returns ``(placement, finish)``."""
    comp = PreparedGraph(graph, cluster).op_time.tolist()
    n, num_dev = graph.num_ops, cluster.num_devices
    lat, bw = cluster.latency.tolist(), cluster.bandwidth.tolist()
    queued = cluster.contention == "link"
    host = [d.name for d in cluster.devices].index(cluster.host) if cluster.host else -1
    per_device = cluster.send == "per-device"
    pred: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for s, d, b in sorted(
        zip(
            graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist(), strict=True
        )
    ):
        pred[d].append((s, b))
    rank = upward_rank(graph, cluster).tolist()
    order = sorted(range(n), key=lambda i: (-rank[i], i))
    busy: list[list[tuple[float, float]]] = [[] for _ in range(num_dev)]
    proc, finish = [-1] * n, [0.0] * n
    link_free = {(a, b): 0.0 for a in range(num_dev) for b in range(num_dev)}
    copies: dict[tuple[int, int], float] = {}  # (producer, device) -> arrival of its copy

    def data_ready(v: int, p: int, book: bool) -> float:
        free = dict(link_free)
        sent = dict(copies)

        def send(a: int, b: int, t: float, nbytes: float) -> float:
            seconds = lat[a][b] + nbytes / bw[a][b]
            if not queued:
                return t + seconds
            free[a, b] = max(t, free[a, b]) + seconds
            return free[a, b]

        ready = 0.0
        for u, nbytes in pred[v]:
            q, arrival = proc[u], finish[u]
            if q != p:
                if per_device and (u, p) in sent:
                    arrival = sent[u, p]
                else:
                    src = q
                    if host >= 0 and host not in (q, p):
                        if per_device and (u, host) in sent:
                            arrival = sent[u, host]
                        else:
                            arrival = send(q, host, arrival, nbytes)
                            if per_device:
                                sent[u, host] = arrival
                        src = host
                    arrival = send(src, p, arrival, nbytes)
                    if per_device:
                        sent[u, p] = arrival
            ready = max(ready, arrival)
        if book:
            link_free.update(free)
            copies.update(sent)
        return ready

    for v in order:
        best = None
        for p in range(num_dev):
            ready = data_ready(v, p, book=False)
            w = comp[v][p]
            starts = [s for s, _ in busy[p]]
            slot = None
            for k in range(bisect.bisect_left(starts, ready), len(starts)):
                begin = max(ready, busy[p][k - 1][1]) if k > 0 else ready
                if begin + w <= starts[k]:
                    slot = (begin, k)
                    break
            if slot is None:
                slot = (max(ready, busy[p][-1][1]) if busy[p] else ready, len(starts))
            if best is None or slot[0] + w < best[0]:
                best = (slot[0] + w, p, slot)
        assert best is not None
        eft, p, (begin, k) = best
        data_ready(v, p, book=True)
        busy[p].insert(k, (begin, eft))
        proc[v], finish[v] = p, eft
    return proc, finish


@pytest.mark.parametrize(("contention", "route", "send"), LINK_MODELS)
def test_heft_lc_agrees_with_its_twin_under_every_link_model(contention, route, send):
    for k, graph in enumerate(small_random_graphs(4)):
        cluster = with_options(random_cluster(3 + k % 2, seed=k), contention, route, send)
        fast = heft_schedule(graph, cluster, contention=True)
        proc, finish = heft_lc_reference(graph, cluster)
        assert fast.placement.tolist() == proc
        assert fast.finish.tolist() == finish


def test_heft_lc_under_the_defaults_is_unchanged_by_the_model_path():
    # the default link model takes data_ready (the decoders' path), the twin the model's rules
    for k, graph in enumerate(small_random_graphs(3)):
        cluster = random_cluster(3, seed=k)
        fast = heft_schedule(graph, cluster, contention=True)
        proc, finish = heft_lc_reference(graph, cluster)
        assert fast.placement.tolist() == proc and fast.finish.tolist() == finish
