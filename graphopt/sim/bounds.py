"""Lower bounds on step time, valid for every placement and schedule with a given fusion.

- **Critical path**: the longest chain of kernels, each at its fastest time over the cluster's
  devices, with no communication. No schedule can finish a chain faster.
- **Work**: the sum over kernels of their fastest times, divided by the number of devices. The
  devices' busy times add up to at least this sum, and the step is at least the busiest device.

``best`` is the larger of the two. With ``fusion=None`` the kernels are the ops themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import engine


@dataclass(frozen=True)
class LowerBounds:
    """Lower bounds on step time, in seconds."""

    critical_path: float
    work: float

    @property
    def best(self) -> float:
        """The tighter (larger) of the two bounds."""
        return max(self.critical_path, self.work)


@njit(cache=True)
def _longest_path(kernel_of, member_ptr, members, succ_ptr, succ_dst, dur):
    """Longest path through the kernel graph (Kahn's order); -1.0 if the kernel graph is cyclic."""
    num_k = len(dur)
    indeg = np.zeros(num_k, dtype=np.int64)
    for u in range(len(kernel_of)):
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            h = kernel_of[succ_dst[e]]
            if h != kernel_of[u]:
                indeg[h] += 1
    queue = np.empty(num_k, dtype=np.int64)
    start = np.zeros(num_k, dtype=np.float64)
    head = 0
    tail = 0
    for k in range(num_k):
        if indeg[k] == 0:
            queue[tail] = k
            tail += 1
    best = 0.0
    while head < tail:
        k = queue[head]
        head += 1
        finish = start[k] + dur[k]
        best = max(best, finish)
        for m in range(member_ptr[k], member_ptr[k + 1]):
            u = members[m]
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                h = kernel_of[succ_dst[e]]
                if h != k:
                    start[h] = max(start[h], finish)
                    indeg[h] -= 1
                    if indeg[h] == 0:
                        queue[tail] = h
                        tail += 1
    if tail < num_k:
        return -1.0
    return best


def lower_bounds(graph: CompGraph, cluster: Cluster, fusion: object | None = None) -> LowerBounds:
    """Both lower bounds for ``graph`` on ``cluster`` with the given fusion bits (default none).

    Raises:
        ValueError: a fusion array of the wrong shape, or an illegal fusion.
    """
    from graphopt.sim.simulator import PreparedGraph, _check_array

    prepared = PreparedGraph(graph, cluster)
    n = graph.num_ops
    bits = np.zeros(n, dtype=np.int64) if fusion is None else _check_array("fusion", fusion, n, 2)
    g = prepared.engine_arrays
    ws = prepared.workspace()
    kernel_of, roots, mptr, members = engine.build_kernels(g.succ_ptr, g.succ_dst, bits, ws.op_int)
    e_kernel = kernel_of[g.succ_dst]
    fastest = np.full(len(roots), np.inf)
    for d in range(cluster.num_devices):
        on_d = np.full(len(roots), d, dtype=np.int64)
        dur = engine.kernel_durations(g, roots, mptr, members, on_d, e_kernel, ws.op_float[0])
        np.minimum(fastest, dur, out=fastest)
    if len(roots) == 0:
        return LowerBounds(critical_path=0.0, work=0.0)
    path = _longest_path(kernel_of, mptr, members, prepared.succ_ptr, prepared.succ_dst, fastest)
    if path < 0:
        raise ValueError("illegal fusion: the fused kernels form a cycle; no lower bound exists")
    return LowerBounds(critical_path=float(path), work=float(fastest.sum() / cluster.num_devices))
