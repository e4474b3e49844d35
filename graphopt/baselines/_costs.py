"""Cost helpers the placement and scheduling baselines share, on the simulator's own rules
(:mod:`graphopt.sim`):

- an op's time on a device is the simulator's (measured for the device kind, else roofline plus
  launch): :func:`op_times` reads it from :class:`~graphopt.sim.PreparedGraph`, so the two never
  drift apart;
- a tensor of ``b`` bytes sent from device ``p`` to ``q`` takes
  :func:`graphopt.sim.links.transfer_time` on the figures of
  :func:`graphopt.sim.links.link_arrays` (re-exported here): the cluster's links, and under
  ``route: via-host`` the two hops through the host for a pair of non-host devices (what the
  simulator's relayed send takes when no other transfer is in its way);
- the *mean* communication cost of an edge (HEFT's ``c̄``) is that time averaged over the
  ``D (D - 1)`` directed links, ``mean(latency) + b * mean(1 / bandwidth)``
  (:func:`graphopt.sim.links.mean_transfer_times`), and 0 when ``D == 1``.

The numba kernels here take the graph as CSR arrays (``graph.successors_csr``: edges are sorted by
source, so the successor slot of an edge is its edge id) and walk ops in topological order, which is
their index order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.sim.links import link_arrays, mean_transfer_times
from graphopt.typing import FloatArray, IntArray

__all__ = [
    "check_finite_times",
    "descending_rank_order",
    "link_arrays",
    "longest_path_to_sink",
    "mean_costs",
    "op_times",
    "positions",
]


def op_times(graph: CompGraph, cluster: Cluster) -> FloatArray:
    """``(N, D)`` seconds of every op on every device, exactly as the simulator computes them."""
    return np.ascontiguousarray(PreparedGraph(graph, cluster).op_time, dtype=np.float64)


def check_finite_times(graph: CompGraph, cluster: Cluster, times: FloatArray) -> None:
    """Refuse op times whose sum on some device overflows float64: no placer can weigh devices
    by them (every decision's step time is infinite and the simulator marks it invalid).

    Raises:
        ValueError: one line naming the graph, the device and its longest op.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        totals = times.sum(axis=0)
    bad = np.flatnonzero(~np.isfinite(totals))
    if bad.size:
        d = int(bad[0])
        op = int(np.argmax(times[:, d]))
        raise ValueError(
            f"the op times of {graph.name} on device {cluster.devices[d].name} of {cluster.name} "
            f"sum beyond float64 (op {graph.op_names[op]!r} takes {times[op, d]:.3g} s): no "
            "placer can weigh devices by them; fix the graph's measured times or FLOPs"
        )


@njit(cache=True)
def mean_costs(comp, edge_data, latency, bandwidth):
    """HEFT's averages: ``w̄[i]`` = mean of ``comp[i, :]`` (summed left to right, divided by ``D``)
    and ``c̄[e]`` = ``mean latency + edge_data[e] * mean(1 / bandwidth)`` over the directed links
    (:func:`~graphopt.sim.links.mean_transfer_times`)."""
    n, num_dev = comp.shape
    w_mean = np.empty(n, dtype=np.float64)
    for i in range(n):
        total = 0.0
        for p in range(num_dev):
            total += comp[i, p]
        w_mean[i] = total / num_dev
    return w_mean, mean_transfer_times(latency, bandwidth, edge_data)


@njit(cache=True)
def longest_path_to_sink(succ_ptr, succ_dst, node_cost, edge_cost):
    """b-level / upward rank: ``r[i] = node_cost[i] + max over successors j of (edge_cost[e] +
    r[j])`` (``node_cost[i]`` for a sink), computed in reverse topological (index) order.
    ``edge_cost`` is indexed by successor slot, i.e. by edge id for a :class:`CompGraph`."""
    n = len(node_cost)
    rank = np.empty(n, dtype=np.float64)
    for i in range(n - 1, -1, -1):
        best = 0.0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            value = edge_cost[e] + rank[succ_dst[e]]
            if value > best:
                best = value
        rank[i] = node_cost[i] + best
    return rank


def descending_rank_order(values: FloatArray) -> IntArray:
    """Op indices sorted by ``values`` descending, ties by ascending index (a stable order)."""
    n = len(values)
    return np.lexsort((np.arange(n), -np.asarray(values, dtype=np.float64))).astype(np.int64)


def positions(order: IntArray) -> IntArray:
    """Inverse permutation: ``positions(order)[order[k]] == k``."""
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order), dtype=np.int64)
    return out
