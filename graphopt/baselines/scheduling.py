"""Scheduling baselines: a priority per op for a given placement (lower runs first; the simulator
breaks ties by topological index, see :mod:`graphopt.sim` rule 6).

Each scheduler takes ``(graph, cluster, placement)`` and returns ``(N,)`` ``int64`` priorities:

- ``"topological"``: all zeros, so each device runs its ready ops in topological order (the
  simulator's default).
- ``"critical-path"``: the b-level of every op, the longest path from the op to a sink counting
  each op at its time on its placed device and each cross-device edge at its transfer time over
  the placed link (``latency + bytes / bandwidth``; same-device edges are free). Ops are ranked by
  descending b-level (ties by index): priority ``k`` for the ``k``-th most critical op, so
  priorities are a permutation of ``0..N-1``.
- ``"heft-rank"``: the same ranking by HEFT's upward rank (mean op time over devices, mean link
  cost per edge; :mod:`graphopt.baselines.heft`), which ignores the placement.
- ``"fcfs"``: first come first served, the order of a runtime that launches ops as their inputs
  arrive (``dispatch: fcfs`` of :mod:`graphopt.hardware`) written as priorities. The placement is
  simulated unfused on the cluster under its own link and memory model with ``dispatch: fcfs``;
  the ops are ranked by ``(start, end, index)`` in that timeline: priority ``k`` for the ``k``-th.
  Under the default dispatch (lowest priority first) these priorities give back exactly that
  timeline whenever no device starts two kernels at one instant, which holds whenever every op
  takes a positive time: each dispatch then sees the same ready kernels as under ``fcfs`` and
  ranks the one ``fcfs`` starts first lowest (every other ready kernel of the device starts
  after it). Ops of 0 s that one device starts at the same instant are ranked by index, which
  may differ from the order ``fcfs`` ran them in, so there the two timelines can differ. Fused
  afterwards, a kernel takes its root's rank; the replay then no longer holds.

The critical-path and HEFT rankings list every producer before its consumers, so on one device
they are valid list schedules; the simulator's transfers and link queues are not part of the
b-level. The ``fcfs`` ranking does too: a consumer starts after its producer ends, or at the same
instant after a producer of 0 s of lower index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from graphopt.baselines._costs import (
    descending_rank_order,
    longest_path_to_sink,
    op_times,
    positions,
)
from graphopt.baselines.heft import upward_rank
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.sim.links import link_arrays, transfer_times
from graphopt.typing import Decision, FloatArray, IntArray


def _check_placement(graph: CompGraph, cluster: Cluster, placement: object) -> IntArray:
    arr = np.asarray(placement)
    n, num_dev = graph.num_ops, cluster.num_devices
    if arr.shape != (n,) or arr.dtype.kind not in "iu":
        raise ValueError(
            f"placement must be an integer array of shape ({n},), got {arr.dtype} {arr.shape}"
        )
    if n and (arr.min() < 0 or arr.max() >= num_dev):
        raise ValueError(f"placement entries must be in [0, {num_dev}) for {cluster.name!r}")
    return arr.astype(np.int64)


def b_level(graph: CompGraph, cluster: Cluster, placement: object) -> FloatArray:
    """Longest path (seconds) from each op to a sink under ``placement`` (module docstring)."""
    dev = _check_placement(graph, cluster, placement)
    times = op_times(graph, cluster)
    node_cost = times[np.arange(graph.num_ops), dev]
    latency, bandwidth = link_arrays(cluster)
    src, dst = dev[graph.edge_src], dev[graph.edge_dst]
    edge_cost = transfer_times(latency, bandwidth, src, dst, graph.edge_bytes)
    succ_ptr, succ_dst = graph.successors_csr
    return longest_path_to_sink(succ_ptr, succ_dst, node_cost, edge_cost)


def topological(graph: CompGraph, cluster: Cluster, placement: object) -> IntArray:
    """All priorities 0: topological order on every device."""
    _check_placement(graph, cluster, placement)
    return np.zeros(graph.num_ops, dtype=np.int64)


def critical_path(graph: CompGraph, cluster: Cluster, placement: object) -> IntArray:
    """Rank of each op by descending b-level under ``placement`` (0 = most critical)."""
    return positions(descending_rank_order(b_level(graph, cluster, placement)))


def heft_rank(graph: CompGraph, cluster: Cluster, placement: object) -> IntArray:
    """Rank of each op by descending HEFT upward rank (0 = highest rank)."""
    _check_placement(graph, cluster, placement)
    return positions(descending_rank_order(upward_rank(graph, cluster)))


def fcfs(graph: CompGraph, cluster: Cluster, placement: object) -> IntArray:
    """Rank of each op by ``(start, end, index)`` in the first-come-first-served timeline of
    ``placement`` on ``cluster`` (0 = first): priorities under which the default dispatch
    replays that timeline (module docstring says when exactly)."""
    dev = _check_placement(graph, cluster, placement)
    replayed = dataclasses.replace(cluster, dispatch="fcfs")
    _, timeline = PreparedGraph(graph, replayed).evaluate_timeline(Decision(placement=dev))
    assert timeline is not None  # unfused: never an illegal fusion
    n = graph.num_ops
    start, end = timeline.start[timeline.kernel_of], timeline.end[timeline.kernel_of]
    return positions(np.lexsort((np.arange(n), end, start)).astype(np.int64))


SCHEDULERS: dict[str, Callable[[CompGraph, Cluster, object], IntArray]] = {
    "topological": topological,
    "critical-path": critical_path,
    "heft-rank": heft_rank,
    "fcfs": fcfs,
}
"""Scheduling baselines by name."""
