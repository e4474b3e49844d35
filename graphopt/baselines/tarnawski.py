"""The placement algorithms of Tarnawski, Phanishayee, Devanur, Mahajan and Nina Paravecino,
"Efficient Algorithms for Device Placement of DNN Graph Operators" (NeurIPS 2020), on graphopt's
chain of op groups (:mod:`~graphopt.baselines.contiguous`).

- :func:`latency_greedy` is the latency baseline of their Appendix F grown into a family. The
  paper's greedy walks the (colocation-contracted) graph in topological order and fills the
  accelerators one after the other, each with as many blocks as its memory takes; a block too
  large for an empty accelerator, and everything once the accelerators are used up, goes to the
  CPU. Here that is the member ``k = 1``; member ``k`` also moves on to the next accelerator once
  the current one holds its share of the work, the shares split over the ``k`` fastest
  accelerators in proportion to their speed (so ``k = A``, every accelerator, is a
  compute-balanced fill). Accelerators are the devices of a kind other than ``CPU``, fastest
  first; the CPU is the first device of kind ``CPU`` (its host under ``route: via-host``); a
  cluster of CPUs only, or of accelerators only, fills all its devices and has no CPU to spill
  to (a block that fits nowhere then stays on the current device). The family's members are
  simulated (default priorities, no fusion) and the fastest kept, ties to the smaller ``k``.
- :func:`max_load_dp` is their throughput algorithm, the dynamic program over contiguous splits
  that minimises the *max-load*: the largest, over devices, of the device's compute plus the
  transfers into and out of it. As in their latency experiments (Appendix F), the split it finds
  for throughput is then scored for latency (by the simulator, where the best-heuristic chain
  ranks it). Their program runs over every ideal (downward-closed set) of the graph; this one
  runs over the prefixes of the chain order (the ideals of one topological order), which keeps it
  ``O(K G^2)`` on graphs of thousands of ops. Stages go to the devices fastest first, the number
  of stages is the one with the least max-load (ties to fewer), and a transfer between groups
  costs the cluster's mean link time, ``mean latency + bytes * mean(1 / bandwidth)`` (their model
  prices each transfer the same whichever devices it joins).

Memory: both charge a device ``params + alpha * outputs`` of its groups
(:mod:`~graphopt.baselines.contiguous`) within its capacity, ``alpha`` the largest fraction for
which the graph fits the devices' total memory (the dynamic program lowers it further while no
split fits, down to parameters alone; if even they do not fit it raises ``ValueError``).
"""

from __future__ import annotations

import numpy as np

from graphopt.baselines._costs import link_arrays, mean_link_figures
from graphopt.baselines.contiguous import (
    MAX_STAGES,
    Chain,
    activation_fraction,
    build_chain,
    device_order,
    placement_of,
    relaxed_split,
)
from graphopt.graph import CompGraph
from graphopt.hardware import HOST_KIND, Cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision, FloatArray, IntArray


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
    chain: Chain, charge: FloatArray, order: IntArray, capacity: FloatArray, k: int, cpu: int
) -> IntArray:
    """The device of each group under member ``k`` of the fill family (module docstring).

    Args:
        chain: the chain.
        charge: ``(G,)`` bytes each group charges its device.
        order: the accelerators, in fill order.
        capacity: ``(A,)`` bytes of each accelerator in ``order``.
        k: how many accelerators share the work (``1``: the paper's memory-only fill).
        cpu: the device that takes what fits no accelerator, -1 for none.
    """
    g, num_acc = chain.num_groups, len(order)
    chosen = order[:k]
    total = chain.work[:, chosen].sum(axis=0)
    speed = np.where(total > 0, 1.0 / np.where(total > 0, total, 1.0), 1.0)
    bound = np.cumsum(speed / speed.sum())
    work = chain.work[:, chosen].mean(axis=1)
    if float(work.sum()) <= 0.0:
        work = np.ones(g)
    middle = (np.cumsum(work) - work / 2) / work.sum()
    used = np.zeros(num_acc)
    out = np.empty(g, dtype=np.int64)
    j = 0
    for group in range(g):
        while j < k - 1 and middle[group] >= bound[j]:  # its share of the work is reached
            j += 1
        while j < num_acc and used[j] > 0 and used[j] + charge[group] > capacity[j]:
            j += 1  # full: the next accelerator
        if j < num_acc and used[j] + charge[group] <= capacity[j]:
            out[group], used[j] = order[j], used[j] + charge[group]
        elif cpu >= 0:  # too large for any accelerator here, or none left
            out[group] = cpu
        else:
            last = min(j, num_acc - 1)
            out[group], used[last] = order[last], used[last] + charge[group]
    return out


def latency_greedy(graph: CompGraph, cluster: Cluster) -> IntArray:
    """The contiguous-fill family of Tarnawski et al.'s latency greedy (module docstring): the
    fastest member by the simulator."""
    if graph.num_ops == 0:
        return np.zeros(0, dtype=np.int64)
    chain = build_chain(graph, cluster)
    accelerators, cpu = _accelerators(cluster)
    order = device_order(chain, accelerators)[:MAX_STAGES]
    capacity = np.asarray(cluster.memory, dtype=np.float64)[order]
    alpha = activation_fraction(chain, float(capacity.sum()))
    charge = chain.params + alpha * chain.outputs
    prepared = PreparedGraph(graph, cluster)
    best: tuple[tuple[bool, float], IntArray] | None = None
    seen: set[bytes] = set()
    for k in range(1, len(order) + 1):
        group_device = fill(chain, charge, order, capacity, k, cpu)
        if group_device.tobytes() in seen:
            continue
        seen.add(group_device.tobytes())
        placement = placement_of(chain, group_device)
        m = prepared.evaluate(Decision(placement=placement))
        key = (not m.valid, m.step_time)
        if best is None or key < best[0]:
            best = (key, placement)
    assert best is not None
    return best[1]


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


def max_load_dp(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Tarnawski et al.'s max-load dynamic program over contiguous splits (module docstring).

    Raises:
        ValueError: the parameters alone fit no split of the chain onto the devices.
    """
    if graph.num_ops == 0:
        return np.zeros(0, dtype=np.int64)
    chain = build_chain(graph, cluster)
    order = device_order(chain)[:MAX_STAGES]
    latency, bandwidth = link_arrays(cluster)
    lat_mean, inv_bw_mean = mean_link_figures(latency, bandwidth)
    edge_cost = lat_mean + chain.edge_bytes * inv_bw_mean
    interval = interval_transfers(chain, edge_cost)
    work = np.ascontiguousarray(chain.work[:, order].T)
    return relaxed_split(graph, cluster, chain, order, work, who="max-load DP", interval=interval)
