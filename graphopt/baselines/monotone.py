"""Monotone in resources: a placer that may leave devices idle, so that adding a device to a
cluster never makes its result worse.

A greedy placer fed a larger cluster can do worse than on the smaller one (HEFT or round-robin
handing work to slow CPUs added beside GPUs). :func:`monotone` wraps a placer so that it also
runs on sub-clusters and keeps the best placement by the simulator (default priorities, no
fusion; ranked by ``(invalid, step time)``, ties to the earlier candidate):

- the devices are grouped into *classes*, devices with the same figures (kind, FLOP/s, memory
  bandwidth, memory, launch overhead, efficiency; the name aside), in order of their first device
  (:func:`device_classes`);
- the candidates are the placer on the sub-cluster of every non-empty set of classes (all their
  devices, in cluster order, with the links between them and the cluster's model options; under
  ``route: via-host`` the host is always kept, idle if unused), the whole cluster first, then
  larger sets before smaller, each size in the order of its classes' bit masks.

**The guarantee.** Adding a device of a class the cluster lacks (any figures that differ), at any
place in the device list, never makes the wrapped placer's simulated result worse: every
sub-cluster of the smaller cluster is again a candidate, the same devices in the same order with
the same links, and its placement runs the same on the larger cluster with the new device idle.
Clusters of more than :data:`MAX_CLASSES` classes (after the addition) take only the sets of the
fastest classes (by the whole graph's time on a class's first device, ties by position): there
the guarantee covers a device slower than every class. A device identical to one the cluster has
joins that class and is not covered. A placer that raises ``ValueError`` on a sub-cluster (no
memory fit) gives no candidate there; when it gives none anywhere, the whole cluster's error is
raised. On a cluster of one class the wrapper runs the placer once and simulates nothing.
Op times whose sum on a device overflows float64 are refused first (one line naming the op):
no placer can weigh devices by them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import fields, replace

import numpy as np

from graphopt.baselines._costs import check_finite_times, op_times
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision, IntArray

MAX_CLASSES = 6
"""Most device classes whose every subset is tried (``2**6 - 1 = 63`` sub-clusters)."""

Placer = Callable[[CompGraph, Cluster], IntArray]


def device_classes(cluster: Cluster) -> list[IntArray]:
    """The devices of each class (devices equal but for their names), classes in order of their
    first device."""
    index: dict[tuple, int] = {}
    members: list[list[int]] = []
    for d, device in enumerate(cluster.devices):
        key = tuple(getattr(device, f.name) for f in fields(device) if f.name != "name")
        if key not in index:
            index[key] = len(members)
            members.append([])
        members[index[key]].append(d)
    return [np.array(m, dtype=np.int64) for m in members]


def subcluster(cluster: Cluster, devices: IntArray) -> Cluster:
    """The cluster of ``devices`` (indices, kept in cluster order) with the links between them and
    the same model options; under ``route: via-host`` the host must be among them."""
    keep = np.sort(np.asarray(devices, dtype=np.int64))
    names = ",".join(cluster.devices[d].name for d in keep)
    return replace(
        cluster,
        name=f"{cluster.name}[{names}]",
        devices=tuple(cluster.devices[d] for d in keep),
        bandwidth=cluster.bandwidth[np.ix_(keep, keep)],
        latency=cluster.latency[np.ix_(keep, keep)],
    )


def class_sets(graph: CompGraph, cluster: Cluster, classes: list[IntArray]) -> list[IntArray]:
    """The device sets the wrapper tries (module docstring), the whole cluster first."""
    count = len(classes)
    if count <= MAX_CLASSES:
        masks = sorted(range(1, 2**count), key=lambda m: (-bin(m).count("1"), m))
        chosen = [[c for c in range(count) if m >> c & 1] for m in masks]
    else:
        times = op_times(graph, cluster).sum(axis=0)
        fastest = sorted(range(count), key=lambda c: (times[classes[c][0]], c))
        chosen = [sorted(fastest[:size]) for size in range(count, 0, -1)]
    host = cluster.host_index
    out = []
    for cs in chosen:
        devices = np.concatenate([classes[c] for c in cs])
        if host >= 0 and host not in devices:
            devices = np.append(devices, host)
        out.append(np.sort(devices))
    return out


def monotone(placer: Placer) -> Placer:
    """``placer`` made monotone in resources (module docstring)."""

    @functools.wraps(placer)
    def wrapped(graph: CompGraph, cluster: Cluster) -> IntArray:
        prepared = PreparedGraph(graph, cluster)
        check_finite_times(graph, cluster, prepared.op_time)
        classes = device_classes(cluster)
        if len(classes) == 1:
            return placer(graph, cluster)
        best: tuple[tuple[bool, float], IntArray] | None = None
        error: ValueError | None = None
        for devices in class_sets(graph, cluster, classes):
            whole = len(devices) == cluster.num_devices
            try:
                local = placer(graph, cluster if whole else subcluster(cluster, devices))
            except ValueError as e:
                error = error or e
                continue
            placement = np.asarray(local, dtype=np.int64) if whole else devices[local]
            m = prepared.evaluate(Decision(placement=placement))
            key = (not m.valid, m.step_time)
            if best is None or key < best[0]:
                best = (key, placement)
        if best is None:
            assert error is not None
            raise error
        return best[1]

    return wrapped
