"""Per-op times of a simulated schedule: when each op started, could have started, and how much
it could slip without delaying the step (its slack; zero on the critical path).

:func:`timeline_times` reads the arrays of :meth:`PreparedGraph.evaluate_timeline
<graphopt.sim.PreparedGraph.evaluate_timeline>`; :func:`schedule_times` the
:class:`~graphopt.typing.Schedule` records of ``evaluate(..., schedule=True)`` (same result).
The times are those of the *realised* schedule: the kernels on a device run in the order the
simulator ran them, so the critical path follows data edges (with their transfer times) and
device order alike. With ``K`` kernels and ``E`` edges:

- ``ready[v]``: when all of the inputs of ``v``'s kernel were on its device (the producer's end
  on the same device, the transfer's end from another one; 0 for a source). Inputs from inside
  the kernel do not count. Where one producer sends several transfers into a device (the
  cluster's ``send: per-consumer``), an input counts as there when the last of them is.
- ``wait[v] = start[v] - ready[v]``: how long ``v`` waited for its device (``>= 0``).
- ``slack[v]``: the latest start of ``v``'s kernel that keeps every later kernel on time, minus
  its start; from a backward pass over the kernels in decreasing start order, with
  ``latest_end[k] = min(latest_start[k'] - lag(k, k'))`` over the kernels ``k'`` after ``k``
  (data successors, lag the transfer time; the next kernel on its device, lag 0), and the step
  time for a kernel with none.
- ``transfer[v]``: total time of the transfers of ``v``'s output (0 when none left its device).

O(K + E): NumPy, and the backward pass compiled (:func:`latest_starts`, whose readable twin
:func:`latest_starts_reference` the tests hold it to).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.graph import CompGraph
from graphopt.sim.simulator import Timeline
from graphopt.typing import FloatArray, IntArray, Schedule


@dataclass(frozen=True)
class ScheduleTimes:
    """Per-op times of one schedule, each ``(N,)`` seconds (module docstring); ``kernel`` is
    each op's kernel, ``root`` that kernel's root op (the op whose priority orders it), ``step``
    the schedule's step time."""

    start: FloatArray
    end: FloatArray
    ready: FloatArray
    slack: FloatArray
    transfer: FloatArray
    kernel: IntArray
    root: IntArray
    step: float

    @property
    def wait(self) -> FloatArray:
        """``start - ready`` (never negative)."""
        return np.maximum(self.start - self.ready, 0.0)

    def critical(self, tolerance: float = 1e-9) -> np.ndarray:
        """``(N,)`` bool: ops whose slack is at most ``tolerance`` times the step time."""
        return self.slack <= tolerance * max(self.step, 1e-30)


def latest_starts_reference(
    order: IntArray,
    k_start: FloatArray,
    k_end: FloatArray,
    out_ptr: IntArray,
    out_dst: IntArray,
    out_lag: FloatArray,
    step: float,
) -> FloatArray:
    """The backward pass (module docstring): each kernel's latest start, visiting kernels in
    reverse ``order`` (by start), successors of ``k`` in ``out_dst[out_ptr[k]:out_ptr[k + 1]]``
    with their lags. Plain Python: the twin of :func:`latest_starts`."""
    latest = np.full(len(k_start), step)
    for k in order[::-1].tolist():
        latest_end = step
        for e in range(out_ptr[k], out_ptr[k + 1]):
            latest_end = min(latest_end, latest[out_dst[e]] - out_lag[e])
        latest[k] = latest_end - (k_end[k] - k_start[k])
    return latest


@njit(cache=True)
def latest_starts(order, k_start, k_end, out_ptr, out_dst, out_lag, step):  # pragma: no cover
    """:func:`latest_starts_reference`, compiled."""
    latest = np.full(len(k_start), step)
    for idx in range(len(order) - 1, -1, -1):
        k = order[idx]
        latest_end = step
        for e in range(out_ptr[k], out_ptr[k + 1]):
            v = latest[out_dst[e]] - out_lag[e]
            if v < latest_end:
                latest_end = v
        latest[k] = latest_end - (k_end[k] - k_start[k])
    return latest


def timeline_times(
    graph: CompGraph, placement: IntArray, timeline: Timeline, compiled: bool = True
) -> ScheduleTimes:
    """The times of every op in ``timeline``, a simulation of ``graph`` with ``placement``
    (module docstring); ``compiled=False`` runs the backward pass's Python twin."""
    n = graph.num_ops
    kernel = np.asarray(timeline.kernel_of, dtype=np.int64)
    k_start, k_end = timeline.start, timeline.end
    num_k = len(k_start)
    placement = np.asarray(placement, dtype=np.int64)
    start, end = k_start[kernel], k_end[kernel]
    num_d = max(int(placement.max(initial=0)), int(timeline.t_dst.max(initial=0))) + 1

    transfer = np.zeros(n)
    np.add.at(transfer, timeline.t_producer, timeline.t_end - timeline.t_start)
    arrival = np.full(n * num_d, -np.inf)
    np.maximum.at(arrival, timeline.t_producer * num_d + timeline.t_dst, timeline.t_end)

    succ_ptr, succ_dst = graph.successors_csr
    src = np.repeat(np.arange(n), np.diff(succ_ptr))
    dst = np.asarray(succ_dst, dtype=np.int64)
    outside = kernel[src] != kernel[dst]
    src, dst = src[outside], dst[outside]
    sent = arrival[src * num_d + placement[dst]]
    cross = (placement[src] != placement[dst]) & np.isfinite(sent)
    avail = np.where(cross, sent, end[src])
    k_ready = np.zeros(num_k)
    np.maximum.at(k_ready, kernel[dst], avail)

    # kernel-level successors: data edges (lag: the transfer) and device order (lag 0)
    order = np.lexsort((k_end, k_start))  # kernels by start, then end
    by_device = order[np.argsort(timeline.device[order], kind="stable")]
    same = timeline.device[by_device[:-1]] == timeline.device[by_device[1:]]
    e_src = np.concatenate([kernel[src], by_device[:-1][same]])
    e_dst = np.concatenate([kernel[dst], by_device[1:][same]])
    e_lag = np.concatenate([avail - end[src], np.zeros(int(same.sum()))])
    by_src = np.argsort(e_src, kind="stable")
    out_ptr = np.zeros(num_k + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_src, minlength=num_k), out=out_ptr[1:])
    step = float(k_end.max()) if num_k else 0.0
    backward = latest_starts if compiled else latest_starts_reference
    latest = backward(
        order.astype(np.int64), k_start, k_end, out_ptr, e_dst[by_src], e_lag[by_src], step
    )
    k_slack = np.maximum(latest - k_start, 0.0)
    return ScheduleTimes(
        start=start,
        end=end,
        ready=k_ready[kernel],
        slack=k_slack[kernel],
        transfer=transfer,
        kernel=kernel,
        root=timeline.root[kernel],
        step=step,
    )


def schedule_times(graph: CompGraph, placement: IntArray, schedule: Schedule) -> ScheduleTimes:
    """:func:`timeline_times` of the records of ``schedule`` (kernels numbered in its order).

    Raises:
        ValueError: a schedule whose kernels do not cover every op exactly once.
    """
    n = graph.num_ops
    kernels = schedule.kernels
    kernel_of = np.full(n, -1, dtype=np.int64)
    for k, record in enumerate(kernels):
        kernel_of[np.asarray(record.ops, dtype=np.int64)] = k
    if (kernel_of < 0).any() or sum(len(k.ops) for k in kernels) != n:
        raise ValueError(
            f"the schedule's {len(kernels)} kernels do not cover the graph's {n} ops once"
        )
    t = schedule.transfers
    timeline = Timeline(
        kernel_of=kernel_of,
        root=np.array([k.ops[-1] for k in kernels], dtype=np.int64),
        device=np.array([k.device for k in kernels], dtype=np.int64),
        start=np.array([k.start for k in kernels], dtype=float),
        end=np.array([k.end for k in kernels], dtype=float),
        t_producer=np.array([x.producer for x in t], dtype=np.int64),
        t_dst=np.array([x.dst for x in t], dtype=np.int64),
        t_start=np.array([x.start for x in t], dtype=float),
        t_end=np.array([x.end for x in t], dtype=float),
    )
    return timeline_times(graph, placement, timeline)
