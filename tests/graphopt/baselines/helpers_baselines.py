"""Shared helpers of the baseline tests: small random graphs and random clusters.

(Named uniquely, not ``conftest``, so that ``from helpers_baselines import ...`` cannot pick up
another test directory's module.)
"""

from __future__ import annotations

import numpy as np

from graphopt.graph import CompGraph
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
