"""Helpers for the simulator tests: unit devices and small hand-made graphs."""

from __future__ import annotations

import numpy as np
import pytest

from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device


def unit_cluster(
    num_devices: int = 2,
    *,
    peak_flops: float = 1.0,
    mem_bandwidth: float = 1e30,
    launch: float = 0.0,
    memory: float = 1e12,
    bandwidth: float = 10.0,
    latency: float = 0.5,
    kind: str = "unit",
) -> Cluster:
    """Devices on which an op takes ``flops / peak_flops`` seconds (memory bound never binds by
    default), joined by identical links."""
    devices = tuple(
        Device(
            name=f"dev{i}",
            kind=kind,
            peak_flops=peak_flops,
            mem_bandwidth=mem_bandwidth,
            memory=memory,
            launch_overhead=launch,
        )
        for i in range(num_devices)
    )
    bw = np.full((num_devices, num_devices), bandwidth)
    lat = np.full((num_devices, num_devices), latency)
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(lat, 0.0)
    return Cluster(name="unit", devices=devices, bandwidth=bw, latency=lat)


def make_graph(ops: list[tuple], edges: list[tuple[str, str, float]], name: str = "t") -> CompGraph:
    """``ops``: ``(name, flops, bytes_accessed, output_bytes, param_bytes)`` tuples, optionally
    with an op class as a sixth entry (default ``elementwise``: every op may fuse)."""
    return CompGraph.build(
        name,
        [
            Op(
                name=o[0],
                type="Op",
                flops=o[1],
                bytes_accessed=o[2],
                output_bytes=o[3],
                param_bytes=o[4],
                op_class=o[5] if len(o) > 5 else "elementwise",
            )
            for o in ops
        ],
        edges,
    )


@pytest.fixture
def cluster2() -> Cluster:
    return unit_cluster(2)
