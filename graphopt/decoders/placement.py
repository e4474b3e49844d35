"""The placement decoder: a list scheduler in the spirit of HEFT and m-ETF whose choices a network
steers, one op at a time, with the partial schedule as feedback.

HEFT (:mod:`graphopt.baselines.heft`) takes ops by decreasing upward rank and puts each on the
device with the earliest finish time (EFT, insertion-based). The decoder generalises it with four
per-op inputs, all optional (``None`` means zeros):

- ``shift`` ``(N,)``: the op's list priority is ``rank_u(i) + shift[i] * SHIFT_UNIT * R``, with
  ``R`` the largest upward rank (the critical path of mean costs). The next op is the **ready**
  op (all producers placed) of highest priority, ties by lower index, so any shift still yields a
  topological order. With zero shifts this is HEFT's order exactly: the upward rank never grows
  along an edge, so HEFT's global order is a ready order.
- ``affinity`` ``(N, D)``: device ``d`` is scored ``EFT(i, d) - affinity[i, d] *
  AFFINITY_UNIT * R`` and the op goes to the lowest score (ties: lower device). Device rows are
  the cluster's devices, so the same network runs on any device count.
- ``anchor`` ``(N,)`` and ``gate`` ``(N,)``: with an anchor placement (for instance the best
  heuristic's), op ``i`` stays on ``anchor[i]`` unless ``gate[i] > 0``; only the ops the network
  releases are placed by the score above, against the timeline the anchored ops have built so
  far. With zero gates the result is the anchor exactly; without an anchor every op is free.

Options: ``contention`` (the link-contention model of ``heft-lc``), ``memory`` (a free op never
goes to a device whose resident parameters it would push past the device's memory; an anchored op
is not checked) and ``colocation`` (a free op of a colocation group goes where the group's first
placed op went). With all inputs zero, no anchor and these options off, the decoder returns
:func:`graphopt.baselines.heft.heft` (or ``heft_contention``) exactly; a test checks it against
both and against the plain twin in ``tests/graphopt/decoders/test_placement.py``.

Performance: the loop is compiled (numba); the ready list is a binary heap, so a step costs
``O(D * (in-degree + log N + max_gaps))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.baselines._costs import link_arrays, op_times
from graphopt.baselines.heft import DEFAULT_MAX_GAPS, data_ready, find_slot, upward_rank
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.heaps import fheap_pop, fheap_push
from graphopt.typing import FloatArray, IntArray

SHIFT_UNIT = 0.05
"""A priority shift of 1 moves an op by 5% of the critical path of mean costs."""
AFFINITY_UNIT = 0.01
"""An affinity of 1 is worth 1% of the critical path of mean costs in the device score."""


@dataclass(frozen=True)
class PlacementInputs:
    """What steers the placement decoder (module docstring); ``None`` means zeros / no anchor.

    Shapes: ``shift``, ``gate``, ``anchor`` ``(N,)``; ``affinity`` ``(N, D)``.
    """

    shift: FloatArray | None = None
    affinity: FloatArray | None = None
    gate: FloatArray | None = None
    anchor: IntArray | None = None


@njit(cache=True)
def _decode_loop(
    key,
    score_bias,
    anchor,
    free,
    comp,
    succ_ptr,
    succ_dst,
    pred_ptr,
    pred_src,
    pred_data,
    latency,
    bandwidth,
    max_gaps,
    contention,
    params,
    memory,
    group,
    num_groups,
):
    n, num_dev = comp.shape
    placement = np.full(n, -1, dtype=np.int64)
    finish = np.zeros(n, dtype=np.float64)
    busy_start = np.empty((num_dev, max(n, 1)), dtype=np.float64)
    busy_end = np.empty((num_dev, max(n, 1)), dtype=np.float64)
    count = np.zeros(num_dev, dtype=np.int64)
    link_free = np.zeros((num_dev, num_dev), dtype=np.float64)
    copy_arrival = np.full((n if contention else 1, num_dev), -1.0)
    tentative = np.zeros(num_dev, dtype=np.float64)
    resident = np.zeros(num_dev, dtype=np.float64)
    group_dev = np.full(max(num_groups, 1), -1, dtype=np.int64)
    waiting = np.zeros(n, dtype=np.int64)
    for v in range(n):
        waiting[v] = pred_ptr[v + 1] - pred_ptr[v]
    # ready heap ordered by (-key, index): highest priority first, ties by lower index
    h_time = np.empty(max(n, 1), dtype=np.float64)
    h_tie = np.empty(max(n, 1), dtype=np.int64)
    h_load = np.empty(max(n, 1), dtype=np.int64)
    base = np.zeros(1, dtype=np.int64)
    size = np.zeros(1, dtype=np.int64)
    for v in range(n):
        if waiting[v] == 0:
            fheap_push(h_time, h_tie, h_load, base, size, 0, -key[v], v, v)
    order = np.empty(n, dtype=np.int64)
    for k in range(n):
        v = fheap_pop(h_time, h_tie, h_load, base, size, 0)
        order[k] = v
        forced = -1
        if not free[v]:
            forced = anchor[v]
        elif group[v] >= 0 and group_dev[group[v]] >= 0:
            forced = group_dev[group[v]]
        best_p = -1
        best_score = np.inf
        best_est = 0.0
        best_eft = 0.0
        best_pos = 0
        for p in range(num_dev):
            if forced >= 0 and p != forced:
                continue
            if forced < 0 and memory[p] > 0.0 and resident[p] + params[v] > memory[p]:
                continue
            ready = data_ready(
                v,
                p,
                pred_ptr,
                pred_src,
                pred_data,
                placement,
                finish,
                latency,
                bandwidth,
                contention,
                link_free,
                copy_arrival,
                tentative,
                False,
            )
            duration = comp[v, p]
            est, pos = find_slot(busy_start[p], busy_end[p], count[p], ready, duration, max_gaps)
            score = est + duration - score_bias[v, p]
            if score < best_score:
                best_p, best_score, best_est, best_eft, best_pos = (
                    p,
                    score,
                    est,
                    est + duration,
                    pos,
                )
        if best_p < 0:  # no device has room for its parameters: the least loaded one
            best_p = int(np.argmin(resident))
            ready = data_ready(
                v,
                best_p,
                pred_ptr,
                pred_src,
                pred_data,
                placement,
                finish,
                latency,
                bandwidth,
                contention,
                link_free,
                copy_arrival,
                tentative,
                False,
            )
            best_est, best_pos = find_slot(
                busy_start[best_p],
                busy_end[best_p],
                count[best_p],
                ready,
                comp[v, best_p],
                max_gaps,
            )
            best_eft = best_est + comp[v, best_p]
        if contention:
            data_ready(
                v,
                best_p,
                pred_ptr,
                pred_src,
                pred_data,
                placement,
                finish,
                latency,
                bandwidth,
                contention,
                link_free,
                copy_arrival,
                tentative,
                True,
            )
        p, c = best_p, count[best_p]
        for j in range(c, best_pos, -1):
            busy_start[p, j] = busy_start[p, j - 1]
            busy_end[p, j] = busy_end[p, j - 1]
        busy_start[p, best_pos] = best_est
        busy_end[p, best_pos] = best_eft
        count[p] = c + 1
        placement[v] = p
        finish[v] = best_eft
        resident[p] += params[v]
        if group[v] >= 0 and group_dev[group[v]] < 0:
            group_dev[group[v]] = p
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_dst[e]
            waiting[w] -= 1
            if waiting[w] == 0:
                fheap_push(h_time, h_tie, h_load, base, size, 0, -key[w], w, w)
    return placement, order


def _checked(name: str, value: object, shape: tuple[int, ...], graph: CompGraph) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}; expected {shape} for {graph.name!r}")
    bad = ~np.isfinite(arr)
    if bad.any():
        op = int(np.flatnonzero(bad.reshape(len(arr), -1).any(axis=1))[0])
        raise ValueError(
            f"{name} of op {graph.op_names[op]!r} (index {op}) is {arr.reshape(len(arr), -1)[op]}; "
            "decoder inputs must be finite"
        )
    return np.ascontiguousarray(arr)


def colocation_groups(graph: CompGraph) -> tuple[IntArray, int]:
    """Colocation group index of each op (``-1`` for none) and the number of groups."""
    ids: dict[str, int] = {}
    group = np.array(
        [ids.setdefault(c, len(ids)) if c else -1 for c in graph.colocation], dtype=np.int64
    )
    return group.reshape(graph.num_ops), len(ids)


def decode_placement(
    graph: CompGraph,
    cluster: Cluster,
    inputs: PlacementInputs | None = None,
    *,
    contention: bool = False,
    memory: bool = False,
    colocation: bool = False,
    max_gaps: int = DEFAULT_MAX_GAPS,
    rank: FloatArray | None = None,
) -> IntArray:
    """The decoded placement, one device index per op (module docstring).

    Args:
        graph: the graph.
        cluster: its devices and links.
        inputs: shift, affinity, gate and anchor; None: all zeros, no anchor (HEFT).
        contention: queue transfers on their links (``heft-lc``'s model).
        memory: free ops avoid devices their parameters would overflow.
        colocation: free ops follow their colocation group's first placed op.
        max_gaps: idle gaps examined per insertion search (HEFT's bound).
        rank: HEFT's upward rank, if already computed (:func:`~graphopt.baselines.heft.upward_rank`).

    Raises:
        ValueError: an input of the wrong shape, a non-finite input (naming the op) or an anchor
            device out of range.
    """
    n, num_dev = graph.num_ops, cluster.num_devices
    inputs = inputs or PlacementInputs()
    comp = np.ascontiguousarray(op_times(graph, cluster))
    if rank is None:
        rank = upward_rank(graph, cluster, comp)
    scale = float(rank.max()) if n else 0.0
    key = np.array(rank, dtype=np.float64)
    if inputs.shift is not None:
        key = key + _checked("shift", inputs.shift, (n,), graph) * (SHIFT_UNIT * scale)
    bias = np.zeros((n, num_dev))
    if inputs.affinity is not None:
        bias = _checked("affinity", inputs.affinity, (n, num_dev), graph) * (AFFINITY_UNIT * scale)
    free = np.ones(n, dtype=np.bool_)
    anchor = np.zeros(n, dtype=np.int64)
    if inputs.anchor is not None:
        anchor = np.asarray(inputs.anchor, dtype=np.int64).reshape(-1)
        if anchor.shape != (n,) or (n and (anchor.min() < 0 or anchor.max() >= num_dev)):
            raise ValueError(f"anchor must be {n} device indices in [0, {num_dev})")
        free = np.zeros(n, dtype=np.bool_)
        if inputs.gate is not None:
            free = _checked("gate", inputs.gate, (n,), graph) > 0.0
    group, num_groups = colocation_groups(graph) if colocation else (np.full(n, -1), 0)
    mem = np.array([d.memory if memory else 0.0 for d in cluster.devices], dtype=np.float64)
    latency, bandwidth = link_arrays(cluster)
    succ_ptr, succ_dst = graph.successors_csr
    pred_ptr, pred_src, pred_edge = graph.predecessors_csr
    pred_data = np.ascontiguousarray(graph.edge_bytes[pred_edge])
    placement, _ = _decode_loop(
        key,
        np.ascontiguousarray(bias),
        anchor,
        free,
        comp,
        succ_ptr,
        succ_dst,
        pred_ptr,
        pred_src,
        pred_data,
        latency,
        bandwidth,
        int(max_gaps),
        contention,
        np.ascontiguousarray(graph.param_bytes, dtype=np.float64),
        mem,
        group,
        num_groups,
    )
    return placement
