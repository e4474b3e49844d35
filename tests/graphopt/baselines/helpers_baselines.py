"""Shared helpers of the baseline tests: small random graphs and random clusters.

(Named uniquely, not ``conftest``, so that ``from helpers_baselines import ...`` cannot pick up
another test directory's module.)
"""

from __future__ import annotations

import numpy as np

from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device, get_cluster
from graphopt.workloads import layered_dag, resolve_graphs, series_parallel_dag


def random_cluster(num_devices: int, seed: int, *, memory: float = 16e9) -> Cluster:
    """Devices of different speeds joined by links of different bandwidths and latencies."""
    rng = np.random.default_rng(seed)
    devices = tuple(
        Device(
            name=f"d{i}",
            kind=f"k{i}",
            peak_flops=float(rng.uniform(4e12, 16e12)),
            mem_bandwidth=float(rng.uniform(2e11, 9e11)),
            memory=memory,
            launch_overhead=5e-6,
        )
        for i in range(num_devices)
    )
    bandwidth = rng.uniform(8e9, 50e9, (num_devices, num_devices))
    latency = rng.uniform(2e-6, 2e-5, (num_devices, num_devices))
    np.fill_diagonal(bandwidth, np.inf)
    np.fill_diagonal(latency, 0.0)
    return Cluster(
        name=f"random-{num_devices}-{seed}", devices=devices, bandwidth=bandwidth, latency=latency
    )


def small_random_graphs(count: int, *, low: int = 20, high: int = 60) -> list[CompGraph]:
    """``count`` seeded random DAGs, alternating layered and series-parallel."""
    rng = np.random.default_rng(1234)
    graphs = []
    for k in range(count):
        n = int(rng.integers(low, high))
        maker = layered_dag if k % 2 == 0 else series_parallel_dag
        graphs.append(maker(n, seed=100 + k))
    return graphs


def tiny_cases() -> list[tuple[CompGraph, Cluster]]:
    """The ``suite:tiny`` graphs on a homogeneous preset, a heterogeneous preset and a random
    cluster, plus a few random graphs on random clusters of 2-4 devices."""
    cases = []
    presets = ("v100-nvlink-4", "hetero-cpu-2gpu")
    for k, graph in enumerate(resolve_graphs("suite:tiny")):
        cases.append((graph, get_cluster(presets[k % 2])))
    for k, graph in enumerate(small_random_graphs(4)):
        cases.append((graph, random_cluster(2 + k % 3, seed=k)))
    return cases


def line_cluster(*speeds: float, memory: float = 1e9) -> Cluster:
    """Devices of the given FLOP/s (no launch overhead), links of 1 byte/s and no latency."""
    devices = tuple(Device(f"d{i}", f"k{i}", s, 1e12, memory, 0.0) for i, s in enumerate(speeds))
    n = len(devices)
    return Cluster("c", devices, np.ones((n, n)), np.zeros((n, n)))


def training_graph() -> CompGraph:
    # fwd0 -> fwd1 -> bwd1 -> bwd0, layer l's forward and backward share a colocation group; fwd0
    # also feeds bwd0 (the stashed activation), and p0 (no group) feeds fwd1 twice over edges of
    # different sizes. The first three ops are the forward pass.
    ops = [
        Op("fwd0", "X", flops=1e12, param_bytes=4, output_bytes=10, colocation="l0"),
        Op("p0", "X", flops=2e12),
        Op("fwd1", "X", flops=1e12, colocation="l1"),
        Op("bwd1", "X", flops=2e12, colocation="l1"),
        Op("bwd0", "X", flops=2e12, param_bytes=1, colocation="l0"),
    ]
    edges = [
        ("fwd0", "fwd1", 3.0),
        ("fwd0", "bwd1", 5.0),
        ("fwd0", "bwd0", 7.0),
        ("p0", "fwd1", 2.0),
        ("fwd1", "bwd1", 1.0),
        ("bwd1", "bwd0", 6.0),
    ]
    return CompGraph.build("train", ops, edges, metadata={"training": True, "forward_ops": 3})


def chain_of(nbytes: float) -> CompGraph:
    """o0 -> o1 -> o2 -> o3 of 1, 1, 1, 3 s, each edge ``nbytes``."""
    ops = [Op(f"o{i}", "X", flops=f * 1e12) for i, f in enumerate([1, 1, 1, 3])]
    return CompGraph.build("chain", ops, [(f"o{i}", f"o{i + 1}", nbytes) for i in range(3)])
