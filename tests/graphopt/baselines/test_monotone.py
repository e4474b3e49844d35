"""Every placer is monotone in resources: adding a device never makes its result worse."""

from __future__ import annotations

import numpy as np
import pytest
from helpers_baselines import random_cluster, small_random_graphs

from graphopt.baselines.monotone import (
    MAX_CLASSES,
    class_sets,
    device_classes,
    monotone,
    subcluster,
)
from graphopt.baselines.placement import PLACERS, round_robin
from graphopt.baselines.staged import measure_chain
from graphopt.graph import CompGraph, Op
from graphopt.hardware import Cluster, Device, get_cluster
from graphopt.sim import PreparedGraph, Simulator
from graphopt.typing import Decision
from graphopt.workloads import resolve_graphs


def key(graph: CompGraph, cluster: Cluster, placement: np.ndarray) -> tuple[bool, float]:
    m = PreparedGraph(graph, cluster).evaluate(Decision(placement=placement))
    return (not m.valid, m.step_time)


def with_device(cluster: Cluster, device: Device, at: int, seed: int) -> Cluster:
    """``cluster`` with ``device`` inserted at index ``at``, its links random."""
    rng = np.random.default_rng(seed)
    n = cluster.num_devices + 1
    keep = [i for i in range(n) if i != at]
    bandwidth = rng.uniform(2e9, 50e9, (n, n))
    latency = rng.uniform(2e-6, 3e-5, (n, n))
    bandwidth[np.ix_(keep, keep)] = cluster.bandwidth
    latency[np.ix_(keep, keep)] = cluster.latency
    devices = list(cluster.devices)
    devices.insert(at, device)
    return Cluster(
        name=f"{cluster.name}+{device.name}",
        devices=tuple(devices),
        bandwidth=bandwidth,
        latency=latency,
    )


def random_device(seed: int) -> Device:
    """A device unlike any of :func:`random_cluster`'s (its own kind), slow or fast."""
    rng = np.random.default_rng(seed)
    return Device(
        name="new",
        kind="new",
        peak_flops=float(rng.choice([0.2e12, 2e12, 20e12])),
        mem_bandwidth=float(rng.uniform(2e10, 9e11)),
        memory=float(rng.choice([1e6, 16e9])),
        launch_overhead=float(rng.choice([5e-6, 5e-5])),
    )


def cases() -> list[tuple[CompGraph, Cluster, Cluster, int]]:
    """``(graph, cluster, cluster with a device added, where it went)`` on random graphs and
    heterogeneous random clusters, the device slow or fast, small or large, at the end or not."""
    out = []
    for k, graph in enumerate(small_random_graphs(12, low=12, high=40)):
        cluster = random_cluster(2 + k % 2, seed=50 + k)
        at = cluster.num_devices if k % 3 == 0 else k % cluster.num_devices
        out.append((graph, cluster, with_device(cluster, random_device(k), at, k), at))
    return out


MEMBER_OF_THE_PAPER = ("tarnawski-greedy", "tarnawski-dp")
"""Placers that return their paper's own member, not wrapped (graphopt.baselines.placement)."""


@pytest.mark.parametrize("name", sorted(set(PLACERS) - set(MEMBER_OF_THE_PAPER)))
def test_adding_a_device_never_makes_a_placer_worse(name):
    placer = PLACERS[name]
    for graph, cluster, larger, at in cases():
        if name == "single" and at < cluster.num_devices:
            continue  # single keeps device 0: monotone only when devices are added after it
        before = key(graph, cluster, placer(graph, cluster))
        after = key(graph, larger, placer(graph, larger))
        assert after <= before, (name, graph.name, cluster.name, at, before, after)


def test_without_the_wrapper_a_slow_device_makes_round_robin_worse():
    # Round-robin on two GPUs plus a CPU 100x slower: every third op waits on the CPU; the
    # wrapper tries the GPUs alone and keeps them.
    graph = CompGraph.build("chain", [Op(f"o{i}", "X", flops=1e12) for i in range(6)], [])
    gpus = get_cluster("v100-nvlink-2")
    cpu = Device("cpu", "CPU", 0.157e12, 9e10, 1e11, 5e-6)
    larger = with_device(gpus, cpu, 2, seed=0)
    raw = key(graph, larger, round_robin(graph, larger))
    wrapped = key(graph, larger, monotone(round_robin)(graph, larger))
    assert wrapped == key(graph, gpus, round_robin(graph, gpus)) < raw


def test_device_classes_and_sets():
    cluster = get_cluster("hetero-cpu-2gpu")  # cpu0, gpu0, gpu1
    assert [c.tolist() for c in device_classes(cluster)] == [[0], [1, 2]]
    graph = resolve_graphs("suite:tiny")[0]
    sets = class_sets(graph, cluster, device_classes(cluster))
    assert [s.tolist() for s in sets] == [[0, 1, 2], [0], [1, 2]]
    gpus = subcluster(cluster, np.array([2, 1]))
    assert [d.name for d in gpus.devices] == ["gpu0", "gpu1"]
    assert np.array_equal(gpus.bandwidth, cluster.bandwidth[1:, 1:])
    assert [c.tolist() for c in device_classes(get_cluster("v100-nvlink-4"))] == [[0, 1, 2, 3]]


def test_many_classes_take_the_fastest_first():
    # Seven classes, device i slower as i grows: the sets are the fastest 7, 6, ..., 1.
    devices = tuple(
        Device(f"d{i}", f"k{i}", 1e12 / (i + 1), 1e11, 1e10, 1e-6) for i in range(MAX_CLASSES + 1)
    )
    n = len(devices)
    cluster = Cluster("many", devices, np.full((n, n), 1e10), np.full((n, n), 1e-6))
    graph = CompGraph.build("g", [Op("a", "X", flops=1e9)], [])
    sets = class_sets(graph, cluster, device_classes(cluster))
    assert [s.tolist() for s in sets] == [list(range(size)) for size in range(n, 0, -1)]


def test_via_host_subclusters_keep_the_host():
    cluster = Cluster(
        "routed",
        get_cluster("hetero-cpu-2gpu").devices,
        get_cluster("hetero-cpu-2gpu").bandwidth,
        get_cluster("hetero-cpu-2gpu").latency,
        route="via-host",
    )
    graph = resolve_graphs("suite:tiny")[0]
    sets = class_sets(graph, cluster, device_classes(cluster))
    assert [s.tolist() for s in sets] == [[0, 1, 2], [0], [0, 1, 2]]
    placement = PLACERS["heft"](graph, cluster)
    assert placement.shape == (graph.num_ops,)


@pytest.mark.expensive  # every placer on many clusters: seconds (CI runs it)
def test_slow_cpus_never_make_the_best_heuristic_worse():
    # The case that asked for this: eight slow CPUs beside four GPUs.
    gpus = get_cluster("v100-nvlink-4")
    larger = gpus
    for i in range(8):
        cpu = Device(f"cpu{i}", "CPU", 0.1e12, 2e10, 6.4e10, 1e-5)
        larger = with_device(larger, cpu, larger.num_devices, seed=i)
    simulator = Simulator()
    for graph in resolve_graphs("suite:tiny")[:2]:
        _, score, best = measure_chain(graph, gpus, "placement", simulator)
        _, score_larger, best_larger = measure_chain(graph, larger, "placement", simulator)
        assert score_larger.of(best_larger).step_time <= score.of(best).step_time


def test_op_times_that_overflow_are_refused_by_every_placer_naming_the_op() -> None:
    """Costs beyond float64 used to reach the placers as inf and NaN (warnings, negative device
    indices, an IndexError in METIS): every wrapped placer now refuses them in one line."""
    import warnings

    import pytest

    from graphopt.baselines.placement import PLACERS
    from graphopt.graph import CompGraph, Op
    from graphopt.hardware import get_cluster

    ops = [Op(f"o{i}", "MatMul", measured={"V100": 1.7e308}) for i in range(6)]
    graph = CompGraph.build("huge", ops, [(f"o{i}", f"o{i + 1}", 10.0) for i in range(5)])
    cluster = get_cluster("v100-nvlink-4")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, placer in PLACERS.items():
            if name == "single":
                continue
            with pytest.raises(ValueError, match="sum beyond float64 \\(op 'o0' takes 1.7e\\+308"):
                placer(graph, cluster)
