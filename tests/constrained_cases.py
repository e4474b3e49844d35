"""Random graphs with placement constraints (:mod:`graphopt.constraints`) on random clusters,
shared by the constraint tests of the library and of the environments."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from graphopt.constraints import constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, Device
from graphopt.workloads import layered_dag

KINDS = ("CPU", "GPU", "TPU")


def random_case(seed: int) -> tuple[CompGraph, Cluster]:
    """A small random graph with random allowed kinds and colocation groups, on a random cluster
    of 2-3 devices of random kinds, colocation enforced half of the time; satisfiable."""
    rng = np.random.default_rng(seed)
    while True:
        n = int(rng.integers(4, 11))
        graph = layered_dag(n, seed=seed, name=f"constrained-{seed}")
        num_dev = int(rng.integers(2, 4))
        kinds = [str(k) for k in rng.choice(KINDS, num_dev)]
        devices = tuple(
            Device(
                f"d{i}",
                kinds[i],
                float(rng.uniform(1e12, 2e13)),
                float(rng.uniform(1e11, 9e11)),
                16e9,
                5e-6,
            )
            for i in range(num_dev)
        )
        enforce = bool(rng.random() < 0.5)
        cluster = Cluster(
            f"rc{seed}",
            devices,
            rng.uniform(5e9, 5e10, (num_dev, num_dev)),
            rng.uniform(1e-6, 2e-5, (num_dev, num_dev)),
            colocation="enforce" if enforce else "hint",
        )
        present = sorted(set(kinds))
        allowed = [
            tuple(rng.choice(present, int(rng.integers(1, len(present) + 1)), replace=False))
            if rng.random() < 0.4
            else ()
            for _ in range(n)
        ]
        groups = [f"g{int(rng.integers(3))}" if rng.random() < 0.5 else "" for _ in range(n)]
        graph = replace(
            graph,
            allowed=tuple(tuple(sorted(a)) for a in allowed),
            colocation=tuple(groups),
        )
        try:
            rules = constraints(graph, cluster)
        except ValueError:  # unsatisfiable draw (kinds no group member shares): draw again
            seed += 10_000
            continue
        if rules.active:
            return graph, cluster
        seed += 10_000


def contiguous_case(seed: int) -> tuple[CompGraph, Cluster]:
    """A small random graph with random colour classes (colocation groups and layers) and, now and
    then, a CPU-only op, on a random cluster of 2-4 devices (CPUs beside accelerators, or of one
    kind) with ``contiguous: true``; satisfiable."""
    rng = np.random.default_rng(seed)
    while True:
        n = int(rng.integers(5, 16))
        graph = layered_dag(n, seed=seed, name=f"contiguous-{seed}")
        num_dev = int(rng.integers(2, 5))
        kinds = [str(k) for k in rng.choice(("CPU", "GPU"), num_dev)]
        devices = tuple(
            Device(f"d{i}", kinds[i], float(rng.uniform(1e12, 2e13)), 5e11, 16e9, 5e-6)
            for i in range(num_dev)
        )
        cluster = Cluster(
            f"cc{seed}",
            devices,
            rng.uniform(5e9, 5e10, (num_dev, num_dev)),
            rng.uniform(1e-6, 2e-5, (num_dev, num_dev)),
            contiguous=True,
        )
        colours = [f"c{int(rng.integers(3))}" if rng.random() < 0.3 else "" for _ in range(n)]
        layers = [f"l{int(rng.integers(4))}" if rng.random() < 0.3 else "" for _ in range(n)]
        cpu_only = [("CPU",) if "CPU" in kinds and rng.random() < 0.1 else () for _ in range(n)]
        graph = replace(
            graph,
            colocation=tuple(colours),
            layer=tuple(layers),
            allowed=tuple(cpu_only) if any(cpu_only) else (),
        )
        try:
            constraints(graph, cluster)
        except ValueError:  # unsatisfiable draw: draw again
            seed += 10_000
            continue
        return graph, cluster
