"""Contiguous splits: a graph as a chain of op groups, cut into stages that each run on one device.

The shared machinery of the placers that cut a graph into contiguous pieces: the layer split
(:func:`~graphopt.baselines.placement.contiguous_split`), the algorithms of Tarnawski et al.
(:mod:`~graphopt.baselines.tarnawski`) and PipeDream's planner
(:mod:`~graphopt.baselines.pipedream_planner`).

**Groups.** The chain's groups are the blocks of :func:`~graphopt.blocks.block_dag`
(colour classes contracted, mutually reachable classes fused, topological order). A *stage* is a
run of consecutive groups: every prefix of the order is an ideal of the block DAG, so such a
stage is contiguous in the sense of Tarnawski et al. (no path leaves it and comes back); on a
training graph the backward ops ride with their forward ops' blocks, so a split of the forward
pass carries the backward pass along, as PipeDream's stages do. The block DAG's own edges
(``dag_src``, ``dag_dst``) let Tarnawski et al.'s dynamic program split over all its ideals
(:mod:`~graphopt.baselines.ideals`), not only the prefixes of one order.

**The chain** (:class:`Chain`, :func:`build_chain`), on the simulator's own op times:

- ``work[g, d]``: seconds of group ``g`` on device ``d`` (its ops' times, summed);
- ``params[g]``, ``outputs[g]``: the parameter and output bytes of its ops; a device holding
  ``g`` is charged ``params[g] + alpha * outputs[g]`` (Baechi's model at ``alpha = 1``: every
  activation the device ever holds; :func:`activation_fraction` relaxes ``alpha`` for training
  graphs whose activations outweigh the cluster's memory);
- group edges ``(a, b, bytes)``, ``a != b``: for each producer in ``a``, the largest of its edges
  into ``b`` (the simulator sends one copy per producer and device), summed over producers.

Graphs of more than :data:`MAX_GROUPS` groups have runs of consecutive groups merged into at most
that many blocks of about equal work, so that the quadratic dynamic programs stay fast.

**Splits** (:func:`min_max_split`): the dynamic program both Tarnawski's max-load algorithm and
PipeDream's planner solve, over stages in chain order on devices in a given order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.baselines._costs import check_finite_times, op_times
from graphopt.blocks import block_dag
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import FloatArray, IntArray

MAX_GROUPS = 1024
"""Most groups a chain keeps (larger graphs merge consecutive groups): the dynamic programs take
``O(K * G**2)`` steps and the interval tables ``8 * G**2`` bytes."""
MAX_STAGES = 64
"""Most stages (devices) a split or a fill considers."""
ALPHAS = tuple(2.0**-k for k in range(17)) + (0.0,)
"""Activation fractions tried, largest first: 1, 1/2, ..., 2**-16, then parameters alone."""


@dataclass(frozen=True)
class Chain:
    """A graph as a chain of groups (module docstring).

    Attributes:
        group: ``(N,)`` the group of each op, ``0..G-1`` in chain order.
        work: ``(G, D)`` seconds of each group on each device.
        params: ``(G,)`` parameter bytes of each group.
        outputs: ``(G,)`` output bytes of each group.
        edge_src: ``(M,)`` source group of each group edge.
        edge_dst: ``(M,)`` destination group of each group edge (``!= edge_src``).
        edge_bytes: ``(M,)`` bytes of each group edge.
        dag_src: ``(E,)`` source group of each edge of the block DAG (unique pairs).
        dag_dst: ``(E,)`` destination group of each edge of the block DAG, ``> dag_src``.
    """

    group: IntArray
    work: FloatArray
    params: FloatArray
    outputs: FloatArray
    edge_src: IntArray
    edge_dst: IntArray
    edge_bytes: FloatArray
    dag_src: IntArray
    dag_dst: IntArray

    @property
    def num_groups(self) -> int:
        return len(self.params)


def build_chain(graph: CompGraph, cluster: Cluster, max_groups: int = MAX_GROUPS) -> Chain:
    """The chain of ``graph`` on ``cluster`` (module docstring).

    Raises:
        ValueError: op times whose sum on a device overflows float64 (naming the op).
    """
    dag = block_dag(graph)
    group, count = dag.block, dag.num_blocks
    dag_src, dag_dst = dag.edge_src, dag.edge_dst
    times = op_times(graph, cluster)
    check_finite_times(graph, cluster, times)  # one line naming the op (the DPs sum them)
    if count > max_groups:  # merge runs of groups into blocks of about equal mean work
        weight = np.bincount(group, weights=times.mean(axis=1), minlength=count).astype(float)
        if float(weight.sum()) <= 0.0:
            weight = np.ones(count)
        middle = np.cumsum(weight) - weight / 2
        block = np.minimum((middle / weight.sum() * max_groups).astype(np.int64), max_groups - 1)
        _, block = np.unique(block, return_inverse=True)
        block = block.reshape(-1).astype(np.int64)
        group = block[group]
        count = int(group.max()) + 1
        # A run of consecutive blocks of a topological order is convex: the merged DAG stays
        # acyclic and in topological order.
        merged = np.unique(np.stack((block[dag_src], block[dag_dst])), axis=1)
        merged = merged[:, merged[0] != merged[1]]
        dag_src, dag_dst = merged[0], merged[1]
    num_dev = cluster.num_devices
    work = np.zeros((count, num_dev))
    np.add.at(work, group, times)
    params = np.bincount(group, weights=graph.param_bytes, minlength=count).astype(float)
    outputs = np.bincount(group, weights=graph.output_bytes, minlength=count).astype(float)
    src_group, dst_group = group[graph.edge_src], group[graph.edge_dst]
    cross = src_group != dst_group
    # One send per producer and destination group, of its largest edge there.
    producer, dst, nbytes = graph.edge_src[cross], dst_group[cross], graph.edge_bytes[cross]
    order = np.lexsort((-nbytes, dst, producer))
    producer, dst, nbytes = producer[order], dst[order], nbytes[order]
    first = np.ones(len(producer), dtype=bool)
    first[1:] = (producer[1:] != producer[:-1]) | (dst[1:] != dst[:-1])
    pairs = group[producer[first]] * count + dst[first]
    unique, inverse = np.unique(pairs, return_inverse=True)
    summed = np.bincount(inverse.reshape(-1), weights=nbytes[first], minlength=len(unique))
    return Chain(
        group=group,
        work=work,
        params=params,
        outputs=outputs,
        edge_src=(unique // count).astype(np.int64),
        edge_dst=(unique % count).astype(np.int64),
        edge_bytes=summed.astype(np.float64),
        dag_src=np.asarray(dag_src, dtype=np.int64),
        dag_dst=np.asarray(dag_dst, dtype=np.int64),
    )


def device_order(chain: Chain, devices: IntArray | None = None) -> IntArray:
    """``devices`` (default: all) fastest first: by the whole chain's time on each, ties by
    index."""
    if devices is None:
        devices = np.arange(chain.work.shape[1], dtype=np.int64)
    devices = np.asarray(devices, dtype=np.int64)
    total = chain.work[:, devices].sum(axis=0)
    return devices[np.lexsort((devices, total))]


def activation_fraction(chain: Chain, capacity: float) -> float:
    """The largest ``alpha`` of :data:`ALPHAS` whose charge (parameters plus ``alpha`` times
    outputs, over the whole graph) fits in ``capacity`` bytes; 0 when none does."""
    params, outputs = float(chain.params.sum()), float(chain.outputs.sum())
    for alpha in ALPHAS:
        if params + alpha * outputs <= capacity:
            return alpha
    return 0.0


def placement_of(chain: Chain, group_device: IntArray) -> IntArray:
    """The op placement that puts every op on its group's device."""
    return np.asarray(group_device, dtype=np.int64)[chain.group]


def stages_to_groups(bounds: IntArray, devices: IntArray, num_groups: int) -> IntArray:
    """The device of each group when stage ``k`` holds groups ``bounds[k]..bounds[k+1]-1`` and runs
    on ``devices[k]``."""
    out = np.empty(num_groups, dtype=np.int64)
    for k in range(len(bounds) - 1):
        out[bounds[k] : bounds[k + 1]] = devices[k]
    return out


@njit(cache=True)
def _split_dp(prefix_work, prefix_charge, capacity, boundary, interval, use_interval):
    """``dp[k, j]``: the least max stage cost of groups ``0..j-1`` cut into ``k + 1`` non-empty
    stages on the first ``k + 1`` devices; ``arg[k, j]``: where the last stage starts."""
    num_stages, size = prefix_work.shape
    g = size - 1
    dp = np.full((num_stages, size), np.inf)
    arg = np.full((num_stages, size), -1, dtype=np.int64)
    for j in range(1, size):
        if prefix_charge[j] <= capacity[0]:
            cost = prefix_work[0, j]
            if use_interval:
                cost += interval[0, j]
            dp[0, j] = cost
            arg[0, j] = 0
    for k in range(1, num_stages):
        for j in range(k + 1, g + 1):
            best = np.inf
            best_i = -1
            for i in range(j - 1, k - 1, -1):  # last stage: groups i..j-1
                if prefix_charge[j] - prefix_charge[i] > capacity[k]:
                    break  # a longer last stage only charges more
                previous = dp[k - 1, i]
                if previous >= best:
                    continue
                cost = prefix_work[k, j] - prefix_work[k, i]
                if use_interval:
                    cost += interval[i, j]
                value = max(previous, boundary[k, i], cost)
                if value < best:
                    best = value
                    best_i = i
            dp[k, j] = best
            arg[k, j] = best_i
    return dp, arg


def min_max_split(
    work: FloatArray,
    charge: FloatArray,
    capacity: FloatArray,
    boundary: FloatArray | None = None,
    interval: FloatArray | None = None,
) -> tuple[float, IntArray]:
    """Cut a chain of ``G`` groups into ``K`` non-empty stages, stage ``k`` on the ``k``-th device,
    for the ``K`` (at most the devices given) with the least objective, ties to fewer stages::

        objective = max over stages k of max(boundary[k, i_k], work_k + interval[i_k, j_k])

    where stage ``k`` holds groups ``i_k..j_k - 1``, ``work_k`` is their summed ``work[k]``, the
    charge of its groups stays within ``capacity[k]``, and ``boundary[0, :]`` is unused (the cut
    into the first stage costs nothing). Solved exactly by dynamic programming in ``O(K G^2)``.

    Args:
        work: ``(K, G)`` seconds of each group on each stage's device.
        charge: ``(G,)`` bytes each group charges its device.
        capacity: ``(K,)`` bytes of each stage's device.
        boundary: ``(K, G + 1)`` cost of cutting before group ``i`` into stage ``k``; default 0.
        interval: ``(G + 1, G + 1)`` extra cost of a stage holding groups ``i..j-1``; default 0.

    Returns:
        ``(objective, bounds)``: ``bounds`` of length ``K + 1`` from 0 to ``G``; ``inf`` and empty
        bounds when no split fits the capacities.
    """
    num_stages, g = work.shape
    prefix_work = np.zeros((num_stages, g + 1))
    np.cumsum(work, axis=1, out=prefix_work[:, 1:])
    prefix_charge = np.zeros(g + 1)
    np.cumsum(charge, out=prefix_charge[1:])
    cut = np.zeros((num_stages, g + 1)) if boundary is None else boundary
    table = np.zeros((1, 1)) if interval is None else interval
    dp, arg = _split_dp(
        prefix_work,
        prefix_charge,
        np.asarray(capacity, dtype=np.float64),
        np.ascontiguousarray(cut, dtype=np.float64),
        np.ascontiguousarray(table, dtype=np.float64),
        interval is not None,
    )
    last = dp[:, g]
    if g == 0 or not np.isfinite(last).any():
        return float("inf"), np.zeros(0, dtype=np.int64)
    k = int(np.argmin(last))  # the first minimum: the fewest stages
    bounds = [g]
    for stage in range(k, -1, -1):
        bounds.append(int(arg[stage, bounds[-1]]))
    return float(last[k]), np.array(bounds[::-1], dtype=np.int64)


def relaxed_split(
    graph: CompGraph,
    cluster: Cluster,
    chain: Chain,
    order: IntArray,
    work: FloatArray,
    *,
    who: str,
    boundary: FloatArray | None = None,
    interval: FloatArray | None = None,
) -> IntArray:
    """The placement of :func:`min_max_split` of ``chain`` onto the devices ``order`` (stage
    ``k`` on ``order[k]``, ``work`` ``(K, G)`` per stage), charging each group its parameters plus
    ``alpha`` times its outputs: ``alpha`` starts at :func:`activation_fraction` of the devices'
    memory and is relaxed along :data:`ALPHAS` until a split fits.

    Raises:
        ValueError: no split fits even with no activations (``who`` names the placer).
    """
    capacity = np.asarray(cluster.memory, dtype=np.float64)[order]
    start = ALPHAS.index(activation_fraction(chain, float(capacity.sum())))
    for alpha in ALPHAS[start:]:
        charge = chain.params + alpha * chain.outputs
        objective, bounds = min_max_split(
            work, charge, capacity, boundary=boundary, interval=interval
        )
        if np.isfinite(objective):
            return placement_of(chain, stages_to_groups(bounds, order, chain.num_groups))
    raise ValueError(
        f"{who}: the parameters of {graph.name} ({chain.params.sum():.3g} bytes) fit no "
        f"contiguous split onto the {len(order)} devices of {cluster.name}; "
        "use a cluster with more memory"
    )
