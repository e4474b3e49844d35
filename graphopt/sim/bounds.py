"""Lower bounds on step time: for a given fusion (:func:`lower_bounds`), or for any fusion
(:func:`any_fusion_lower_bounds`).

:func:`lower_bounds` is valid for every placement and schedule with the given fusion bits:

- **Critical path**: the longest chain of kernels, each at its fastest time over the cluster's
  devices, with no communication. No schedule can finish a chain faster.
- **Work**: the sum over kernels of their fastest times, divided by the number of devices. The
  devices' busy times add up to at least this sum, and the step is at least the busiest device.

``best`` is the larger of the two. With ``fusion=None`` the kernels are the ops themselves. That
bound is *not* valid once fusion may change: a fused kernel pays one launch overhead and only the
bytes that cross its border, so a fused decision can beat it (e.g. on ``random-layered-20-s0``).

:func:`any_fusion_lower_bounds` is valid for every placement, schedule *and* fusion. It gives every
op ``u`` two weights, each a share of any kernel's time that no grouping can take away
(:mod:`graphopt.sim` rules 3-4, on device ``d`` with launch overhead ``L_d``):

- compute: ``flops_u / (peak_d c_u)``; bytes: ``s_u / (bw_d m_u)`` (``c_u``, ``m_u``: the op's
  compute and memory efficiency on ``d``, :class:`~graphopt.hardware.Device`) with
  ``s_u = bytes_u - (bytes of u's in-edges) - (u's output bytes if u has a consumer)``, what is left
  of ``u``'s traffic when every input stays on chip and its output is never stored;
- a measured op (on ``d``'s kind) takes the smaller of each and ``measured_u - L_d``;
- the weight is the minimum over devices.

A kernel ``K`` on ``d`` then takes at least ``sum_K w + L`` for either weight ``w``, with ``L`` the
smallest launch overhead: a roofline kernel takes at least its members' compute weights and at
least the bytes crossing its border, each at its op's memory rate (``>= sum_K s / (bw_d m)``),
plus ``L_d``; an all-measured kernel takes at
least ``sum_K measured - (|K| - 1) L_d``. Hence, per weight:

- **Work**: ``(sum_u w_u + L) / D``: every kernel runs somewhere, and there is at least one.
- **Critical path**: ``longest path of max(w, 0) + L + sum_u min(w_u, 0)``. The kernels holding a
  chain of ops run one after another (each once: the kernel graph is acyclic), and each takes at
  least its members' weights plus ``L``; members off the chain are dropped, which is safe for
  non-negative weights; the last term pays for the negative ones (a measured time below the launch
  overhead, or bytes below the edge bytes; rare).

``critical_path`` and ``work`` are the larger over the two weights. The bound can be reached: on
``random-sp-30-s1`` (``v100-nvlink-2``) it is 25.4 us, the step time of fusing every op into one
kernel (the bound without fusion is 185 us there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import engine
from graphopt.sim.simulator import PreparedGraph, _check_array


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
    prepared = PreparedGraph(graph, cluster)
    n = graph.num_ops
    bits = np.zeros(n, dtype=np.int64) if fusion is None else _check_array("fusion", fusion, n, 2)
    g = prepared.engine_arrays
    ws = prepared.workspace()
    kernel_of, roots, mptr, members = engine.build_kernels(g.succ_ptr, g.succ_dst, bits, ws.op_int)
    # the types of the engine's own call of kernel_durations (one compiled signature): the
    # consumers' kernels in the workspace's e_cons, the devices int32
    e_cons = ws.edge_pair[0]
    e_cons[: len(g.succ_dst), 0] = kernel_of[g.succ_dst]
    fastest = np.full(len(roots), np.inf)
    for d in range(cluster.num_devices):
        on_d = np.full(len(roots), d, dtype=np.int32)
        dur = engine.kernel_durations(g, roots, mptr, members, on_d, e_cons, ws.op_float[0])
        np.minimum(fastest, dur, out=fastest)
    if len(roots) == 0:
        return LowerBounds(critical_path=0.0, work=0.0)
    path = _longest_path(kernel_of, mptr, members, prepared.succ_ptr, prepared.succ_dst, fastest)
    if path < 0:
        raise ValueError("illegal fusion: the fused kernels form a cycle; no lower bound exists")
    with np.errstate(over="ignore"):  # costs beyond float64: inf, as the simulator's step time,
        work = float(fastest.sum() / cluster.num_devices)  # whose reason says so (once)
    return LowerBounds(critical_path=float(path), work=work)


def any_fusion_lower_bounds(graph: CompGraph, cluster: Cluster) -> LowerBounds:
    """Both lower bounds for ``graph`` on ``cluster``, valid for every placement, schedule and
    fusion (module docstring): the bounds of the tasks that decide fusion."""
    prepared = PreparedGraph(graph, cluster)
    n = graph.num_ops
    if n == 0:
        return LowerBounds(critical_path=0.0, work=0.0)
    succ_ptr, succ_dst = prepared.succ_ptr, prepared.succ_dst
    in_bytes = np.bincount(succ_dst, weights=graph.edge_bytes, minlength=n)
    has_consumer = np.diff(succ_ptr) > 0
    left = graph.bytes_accessed - in_bytes - np.where(has_consumer, graph.output_bytes, 0.0)
    measured = prepared.op_meas - prepared.launch[None, :]  # NaN where not measured: fmin skips it
    launch = float(prepared.launch.min())
    ops = np.arange(n, dtype=np.int32)  # int32 as lower_bounds' kernels: one _longest_path compiled
    paths, works = [], []
    compute = graph.flops[:, None] * prepared.class_cinv[:, prepared.dev_class]
    memory = left[:, None] * prepared.class_binv[:, prepared.dev_class]
    for per_device in (compute, memory):
        w = np.fmin(per_device, measured).min(axis=1)
        negative = float(np.minimum(w, 0.0).sum())
        ptr = np.arange(n + 1, dtype=np.int32)
        path = _longest_path(ops, ptr, ops, succ_ptr, succ_dst, np.maximum(w, 0.0))
        paths.append(float(path) + launch + negative)
        works.append((float(w.sum()) + launch) / cluster.num_devices)
    return LowerBounds(critical_path=max(0.0, *paths), work=max(0.0, *works))
