"""Placement baselines: every op on one device; ops dealt to devices in turn.

Each placer takes ``(graph, cluster)`` and returns an ``int64`` array of device indices, one per op
in topological order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import IntArray


def single_device(graph: CompGraph, cluster: Cluster, device: int = 0) -> IntArray:
    """Every op on ``device`` (default 0): the reference every speed-up is measured against."""
    if not 0 <= device < cluster.num_devices:
        raise ValueError(f"device {device} is outside [0, {cluster.num_devices}) for {cluster.name!r}")
    return np.full(graph.num_ops, device, dtype=np.int64)


def round_robin(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Op ``i`` on device ``i mod D``: perfectly balanced op counts, no regard for communication."""
    return np.arange(graph.num_ops, dtype=np.int64) % cluster.num_devices


PLACERS: dict[str, Callable[[CompGraph, Cluster], IntArray]] = {
    "single": single_device,
    "round-robin": round_robin,
}
"""Placement baselines by name (the names the CLI accepts)."""
