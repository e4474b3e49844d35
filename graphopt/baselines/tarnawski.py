"""The placement algorithms of Tarnawski, Phanishayee, Devanur, Mahajan and Nina Paravecino,
"Efficient Algorithms for Device Placement of DNN Graph Operators" (NeurIPS 2020), on graphopt's
chain of blocks (:mod:`~graphopt.blocks`, :mod:`~graphopt.baselines.contiguous`).

- :func:`latency_greedy` is their latency baseline (Appendix F) as the paper states it: walk the
  blocks (colour classes contracted, strongly connected components fused) in topological order
  and fill the accelerators one after the other, each with as many consecutive blocks as its
  memory takes; a block too large for an empty accelerator, and everything once the accelerators
  are used up, goes to the CPU. Accelerators are the devices of a kind other than ``CPU``,
  fastest first; the CPU is the first device of kind ``CPU`` (its host under ``route:
  via-host``); a cluster of CPUs only, or of accelerators only, fills all its devices and has no
  CPU to spill to (a block that fits nowhere then stays on the last device). One member, no
  simulation: each accelerator holds a run of consecutive blocks, a contiguous set.
- :func:`max_load_dp` is their throughput algorithm: the dynamic program over the ideals of the
  block DAG (:mod:`~graphopt.baselines.ideals`) that minimises the *max-load*, the largest, over
  devices, of the device's compute plus the transfers into and out of it. Devices are taken
  fastest first and may stay idle; a transfer between blocks costs the cluster's mean link time,
  ``mean latency + bytes * mean(1 / bandwidth)`` (:func:`graphopt.sim.links.mean_transfer_times`;
  their model prices each transfer the same whichever devices it joins). As in their latency experiments (Appendix F), the split it finds
  for throughput is then scored for latency by the simulator, where the best-heuristic chain
  ranks it. A graph whose block DAG has more than
  :data:`~graphopt.baselines.ideals.MAX_IDEALS` ideals, or whose split walks more than
  :data:`~graphopt.baselines.ideals.MAX_PAIRS` pairs of them, is refused (``ValueError``).

Memory: both charge a device ``params + alpha * outputs`` of its blocks
(:mod:`~graphopt.baselines.contiguous`) within its capacity, ``alpha`` the largest fraction for
which the graph fits the devices' total memory (the dynamic program lowers it further while no
split fits, down to parameters alone; if even they do not fit it raises ``ValueError``).
"""

from __future__ import annotations

import numpy as np
from cachetools import LRUCache

from graphopt.baselines.contiguous import (
    ALPHAS,
    MAX_STAGES,
    Chain,
    activation_fraction,
    build_chain,
    device_order,
    placement_of,
)
from graphopt.baselines.ideals import ideal_split, ideals_of
from graphopt.blocks import class_names
from graphopt.graph import CompGraph
from graphopt.hardware import HOST_KIND, Cluster
from graphopt.sim.links import link_arrays, mean_transfer_times
from graphopt.typing import FloatArray, IntArray


def _accelerators(cluster: Cluster) -> tuple[IntArray, int]:
    """``(accelerators, cpu)``: the devices to fill and the device that takes what does not fit
    (-1 when there is none: module docstring)."""
    kinds = np.array([d.kind for d in cluster.devices])
    is_cpu = kinds == HOST_KIND
    if is_cpu.all() or not is_cpu.any():
        return np.arange(cluster.num_devices, dtype=np.int64), -1
    cpu = cluster.host_index if cluster.host_index >= 0 else int(np.flatnonzero(is_cpu)[0])
    return np.flatnonzero(~is_cpu).astype(np.int64), cpu


def fill(
    chain: Chain, charge: FloatArray, order: IntArray, capacity: FloatArray, cpu: int
) -> IntArray:
    """The device of each block under the paper's greedy (module docstring).

    Args:
        chain: the chain of blocks, in topological order.
        charge: ``(B,)`` bytes each block charges its device.
        order: the accelerators, in fill order.
        capacity: ``(A,)`` bytes of each accelerator in ``order``.
        cpu: the device that takes what fits no accelerator, -1 for none.
    """
    num_acc = len(order)
    used = np.zeros(num_acc)
    out = np.empty(chain.num_groups, dtype=np.int64)
    j = 0
    for block in range(chain.num_groups):
        while j < num_acc and used[j] > 0 and used[j] + charge[block] > capacity[j]:
            j += 1  # full: the next accelerator
        if j < num_acc and used[j] + charge[block] <= capacity[j]:
            out[block], used[j] = order[j], used[j] + charge[block]
        elif cpu >= 0:  # too large for an empty accelerator, or none left
            out[block] = cpu
        else:
            last = min(j, num_acc - 1)
            out[block], used[last] = order[last], used[last] + charge[block]
    return out


def latency_greedy(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Tarnawski et al.'s latency greedy (module docstring)."""
    if graph.num_ops == 0:
        return np.zeros(0, dtype=np.int64)
    chain = build_chain(graph, cluster)
    accelerators, cpu = _accelerators(cluster)
    order = device_order(chain, accelerators)[:MAX_STAGES]
    capacity = np.asarray(cluster.memory, dtype=np.float64)[order]
    alpha = activation_fraction(chain, float(capacity.sum()))
    charge = chain.params + alpha * chain.outputs
    return placement_of(chain, fill(chain, charge, order, capacity, cpu))


def interval_transfers(chain: Chain, edge_cost: FloatArray) -> FloatArray:
    """``(G + 1, G + 1)``: entry ``[i, j]`` (``i < j``) is the summed ``edge_cost`` of the group
    edges with exactly one end in groups ``i..j-1``: a stage's transfers in and out."""
    g = chain.num_groups
    lo = np.minimum(chain.edge_src, chain.edge_dst)
    hi = np.maximum(chain.edge_src, chain.edge_dst)
    incident = np.bincount(lo, weights=edge_cost, minlength=g) + np.bincount(
        hi, weights=edge_cost, minlength=g
    )
    prefix = np.concatenate(([0.0], np.cumsum(incident)))
    inner = np.zeros((g + 1, g + 1))
    np.add.at(inner, (lo, hi + 1), edge_cost)
    inner = np.cumsum(inner, axis=1)  # [lo, j]: edges from lo with hi < j
    inner = np.cumsum(inner[::-1], axis=0)[::-1]  # [i, j]: lo >= i and hi < j
    table = prefix[None, :] - prefix[:, None] - 2.0 * inner
    return np.maximum(table, 0.0)


_DP_CACHE_SIZE = 16
_DP_CACHE: LRUCache[tuple[str, ...], IntArray | ValueError] = LRUCache(maxsize=_DP_CACHE_SIZE)
"""Results of :func:`max_load_dp` kept per process (:func:`_dp_key`): the same pair is placed
again by every task's heuristic chain, and the DP is the slowest placer."""


def _dp_key(graph: CompGraph, cluster: Cluster) -> tuple[str, ...]:
    """What the DP reads: the two fingerprints, and the block DAG's inputs the graph's
    fingerprint leaves out (the colocation groups, the layers, the forward part)."""
    forward = (graph.metadata.get("training"), graph.metadata.get("forward_ops"))
    return (
        graph.fingerprint,
        cluster.fingerprint,
        "\0".join(graph.colocation),
        "\0".join(graph.layer),
        repr(forward),
    )


def max_load_dp(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Tarnawski et al.'s max-load dynamic program over the ideals of the block DAG (module
    docstring). The result (or refusal) of the last :data:`_DP_CACHE_SIZE` pairs is kept
    (:func:`_dp_key`); each call returns a fresh array.

    Raises:
        ValueError: the block DAG has more ideals than the bound, or the parameters alone fit no
            split onto the devices.
    """
    key = _dp_key(graph, cluster)
    found = _DP_CACHE.get(key)
    if found is None:
        try:
            found = _max_load_dp(graph, cluster)
        except ValueError as e:
            found = e
        _DP_CACHE[key] = found
    if isinstance(found, ValueError):
        raise ValueError(str(found))
    return found.copy()


def _max_load_dp(graph: CompGraph, cluster: Cluster) -> IntArray:
    """:func:`max_load_dp` without its cache."""
    if graph.num_ops == 0:
        return np.zeros(0, dtype=np.int64)
    chain = build_chain(graph, cluster)
    try:
        ideals = ideals_of(chain.num_groups, chain.dag_src, chain.dag_dst)
    except ValueError as e:
        raise ValueError(f"max-load DP on {graph.name}: {e}") from e
    order = device_order(chain)[:MAX_STAGES]
    latency, bandwidth = link_arrays(cluster)
    edge_cost = mean_transfer_times(latency, bandwidth, chain.edge_bytes)
    work = chain.work[:, order]
    capacity = np.asarray(cluster.memory, dtype=np.float64)[order]
    start = ALPHAS.index(activation_fraction(chain, float(capacity.sum())))
    for alpha in ALPHAS[start:]:
        charge = chain.params + alpha * chain.outputs
        try:
            objective, stage = ideal_split(
                ideals, work, charge, capacity, chain.edge_src, chain.edge_dst, edge_cost
            )
        except ValueError as e:
            raise ValueError(f"max-load DP on {graph.name}: {e}") from e
        if np.isfinite(objective):
            return placement_of(chain, order[stage])
    largest = float(capacity.max())
    if np.any(chain.params > largest):  # one block alone fits no device: name its classes
        b = int(np.flatnonzero(chain.params > largest)[0])
        what = class_names(graph, np.flatnonzero(chain.group == b))
        raise ValueError(
            f"max-load DP: the {what} of {graph.name} must run on one device, and its parameters "
            f"({chain.params[b]:.3g} bytes) fit no device of {cluster.name} (at most "
            f"{largest:.3g} bytes); use a cluster with more memory or give its ops other "
            "colocation groups/layers"
        )
    raise ValueError(
        f"max-load DP: the parameters of {graph.name} ({chain.params.sum():.3g} bytes) fit no "
        f"contiguous split onto the {len(order)} devices of {cluster.name}; "
        "use a cluster with more memory"
    )
