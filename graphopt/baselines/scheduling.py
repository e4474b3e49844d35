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

Both rankings list every producer before its consumers, so on one device they are valid list
schedules; the simulator's transfers and link queues are not part of the b-level.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphopt.baselines._costs import (
    descending_rank_order,
    link_arrays,
    longest_path_to_sink,
    op_times,
    positions,
)
from graphopt.baselines.heft import upward_rank
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import FloatArray, IntArray


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
    edge_cost = np.where(
        src == dst, 0.0, latency[src, dst] + graph.edge_bytes / bandwidth[src, dst]
    )
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


SCHEDULERS: dict[str, Callable[[CompGraph, Cluster, object], IntArray]] = {
    "topological": topological,
    "critical-path": critical_path,
    "heft-rank": heft_rank,
}
"""Scheduling baselines by name."""
