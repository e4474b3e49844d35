"""HEFT, Heterogeneous Earliest Finish Time (Topcuoglu, Hariri and Wu, "Performance-Effective and
Low-Complexity Task Scheduling for Heterogeneous Computing", IEEE TPDS 13(3), 2002).

Two phases:

1. **Task prioritising.** The upward rank of task ``i`` is
   ``rank_u(i) = w̄_i + max_{j in succ(i)} (c̄_ij + rank_u(j))`` (``w̄_i`` for an exit task), with
   ``w̄_i`` the mean of ``i``'s computation cost over the processors and ``c̄_ij`` the mean over the
   directed links ``(p, q), p != q`` of ``latency[p, q] + data_ij / bandwidth[p, q]``. Tasks are
   scheduled by decreasing rank, ties by lower index; with non-negative costs this is a
   topological order.
2. **Processor selection (insertion-based).** For the next task ``v`` and every processor ``p``:
   the data-ready time is ``max over predecessors u of AFT(u) + comm(proc(u), p, data_uv)`` with
   the *actual* link, ``comm(q, p, b) = latency[q, p] + b / bandwidth[q, p]`` (0 when ``q == p``);
   ``EST(v, p)`` is the start of the earliest idle gap on ``p`` that begins at or after the ready
   time and is at least ``w[v, p]`` long (or the end of ``p``'s last task);
   ``EFT = EST + w[v, p]``. ``v`` goes to the processor with the smallest EFT (ties: lower index).

HEFT's own model has no link contention and no memory limit: its makespan is an estimate; the
simulator prices the placement it returns. ``contention=True`` (the ``"heft-lc"`` placer) is a
link-contention-aware variant in the spirit of Sinnen and Sousa ("Communication contention in task
scheduling", IEEE TPDS 16(6), 2005), closer to the simulator (rule 5): the output of ``u`` is sent
to a device once and reused by every consumer there, and the transfers on a link queue one after
another (each starts at ``max(AFT(u), link free)``, booked in scheduling order, an op's inputs in
producer order, without insertion). It follows the cluster's link model
(:class:`~graphopt.typing.ClusterModel`): under ``contention: none`` nothing queues, under
``send: per-consumer`` every edge sends its own copy, and under ``route: via-host`` a send
between two non-host devices takes two hops through the host, the upload shared per device
(:func:`graphopt.sim.links.modelled_ready`).
On the training graphs of the GO suite it gives placements that simulate markedly faster
(``gnmt-8`` on ``v100-nvlink-8``: 0.99 s against 1.24 s). On a :class:`~graphopt.graph.CompGraph` a task is an op,
``w[i, p]`` is the simulator's op time (:func:`graphopt.baselines._costs.op_times`) and ``data`` is
the edge's bytes.

Performance: the schedule loop (:func:`list_schedule`, shared with the placement decoder of
:mod:`graphopt.decoders.placement`, which generalises it) is compiled (numba); it takes the ready
op of highest rank from a binary heap, which with the upward rank is HEFT's global order. Each
device keeps its busy intervals sorted by start in a flat array; the gap search
(:func:`graphopt.sim.links.find_slot`) starts at the first interval beginning at or after the
ready time (binary search) and looks at most at ``max_gaps`` gaps before falling back to the end
of the device's timeline. That bound is the one approximation: with ``max_gaps=None`` the search
is the paper's exhaustive one; ``max_gaps=0`` is non-insertion HEFT. The default (256) only
matters on graphs where a device's timeline holds hundreds of gaps after an op's ready time; the
readable twin in ``tests/graphopt/baselines/test_heft.py`` applies the same rule and must agree
exactly. Link arrays, transfer times and the gap search are :mod:`graphopt.sim.links`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.baselines._costs import longest_path_to_sink, mean_costs, op_times
from graphopt.constraints import constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.heaps import fheap_pop, fheap_push
from graphopt.sim.links import (
    book_interval,
    find_slot,
    link_arrays,
    link_model,
    link_model_of,
    modelled_ready,
    transfer_time,
)
from graphopt.typing import FloatArray, IntArray, LinkModel, ListInputs

DEFAULT_MAX_GAPS = 256
"""Idle gaps examined per (op, device) by the insertion search (see the module docstring)."""


@dataclass(frozen=True)
class HeftSchedule:
    """HEFT's result: placement and HEFT's own timeline (no memory limit; no link contention
    unless asked for).

    Shapes: every array is ``(N,)`` over tasks.
    """

    placement: IntArray
    """Processor of each task."""
    start: FloatArray
    """Actual start time (AST) of each task under HEFT's model."""
    finish: FloatArray
    """Actual finish time (AFT) of each task."""
    rank: FloatArray
    """Upward rank ``rank_u`` of each task."""
    order: IntArray
    """Tasks in the order they were scheduled (decreasing rank, ties by index)."""
    makespan: float
    """Largest finish time (0 for no tasks): HEFT's schedule length."""

    @classmethod
    def of(
        cls,
        rank: FloatArray,
        placement: IntArray,
        start: FloatArray,
        finish: FloatArray,
        order: IntArray,
    ) -> HeftSchedule:
        """The schedule of ``rank`` and what :func:`list_schedule` returns."""
        makespan = float(finish.max()) if len(finish) else 0.0
        return cls(placement, start, finish, rank, order, makespan)


@njit(cache=True, inline="always")
def data_ready(v, p, preds, placement, finish, links, contention, booking, commit):
    """Data-ready time of ``v`` on ``p``; with ``contention``, transfers queue on their link
    (``tentative`` holds the link's free time while ``v``'s own transfers are booked) and a
    tensor already sent to ``p`` is reused. ``commit`` books the transfers.

    ``preds`` is ``(pred_ptr, pred_src, pred_data)``, ``links`` ``(latency, bandwidth)`` and
    ``booking`` ``(link_free, copy_arrival, tentative)`` (tuples: numba unpacks them at no cost).
    """
    pred_ptr, pred_src, pred_data = preds
    latency, bandwidth = links
    link_free, copy_arrival, tentative = booking
    ready = 0.0
    if contention:
        for q in range(latency.shape[0]):
            tentative[q] = link_free[q, p]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u = pred_src[e]
        q = placement[u]
        arrival = finish[u]
        if q != p:
            cost = transfer_time(latency, bandwidth, q, p, pred_data[e])
            if not contention:
                arrival += cost
            elif copy_arrival[u, p] >= 0.0:
                arrival = copy_arrival[u, p]
            else:
                arrival = max(arrival, tentative[q]) + cost
                tentative[q] = arrival
                if commit:
                    copy_arrival[u, p] = arrival
        if arrival > ready:
            ready = arrival
    if contention and commit:
        for q in range(latency.shape[0]):
            link_free[q, p] = tentative[q]
    return ready


@njit(cache=True)
def schedule_arrays(n, num_dev, contention):
    """A list schedule's empty state for ``n`` ops on ``num_dev`` devices: ``placement`` (-1:
    not placed), ``start``, ``finish``, each device's booked intervals (``busy_start``,
    ``busy_end``, ``count``: :func:`graphopt.sim.links.find_slot`'s), and the link booking
    (``link_free``, ``copy_arrival`` (one row per op under ``contention``), ``tentative``:
    :func:`data_ready`'s). HEFT's loop (:func:`list_schedule`) and the step-wise decoder's state
    (:func:`graphopt.decoders.stepwise.new_state`) start from it."""
    placement = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n, dtype=np.float64)
    finish = np.zeros(n, dtype=np.float64)
    busy_start = np.empty((num_dev, max(n, 1)), dtype=np.float64)
    busy_end = np.empty((num_dev, max(n, 1)), dtype=np.float64)
    count = np.zeros(num_dev, dtype=np.int64)
    link_free = np.zeros((num_dev, num_dev), dtype=np.float64)
    copy_arrival = np.full((n if contention else 1, num_dev), -1.0)
    tentative = np.zeros(num_dev, dtype=np.float64)
    return placement, start, finish, busy_start, busy_end, count, link_free, copy_arrival, tentative


@njit(cache=True)
def list_schedule(
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
    links,
    max_gaps,
    contention,
    params,
    memory,
    group,
    num_groups,
):
    """The list-scheduling loop of HEFT and of the placement decoder
    (:mod:`graphopt.decoders.placement`): the ready op of highest ``key`` (ties: lower index)
    goes to the device of lowest ``EST + w - score_bias[v, p]`` (ties: lower device) among those
    allowed: only ``anchor[v]`` when not ``free[v]``; its colocation group's device once one of
    its ops is placed (``group``); with ``memory[p] > 0``, devices whose resident parameters stay
    within it (none left: the least loaded). Returns ``(placement, start, finish, order)``.

    With ``key`` the upward rank, zero ``score_bias``, every op free, no memory and no groups it
    is HEFT: the upward rank never grows along an edge, so HEFT's global order (decreasing rank,
    ties by index) is always a ready op of highest rank.

    ``links`` is a :class:`~graphopt.typing.LinkModel` (:func:`schedule_links`). With
    ``contention`` and its options at their defaults (``queued``, no host, per device) the
    inputs' arrivals are :func:`data_ready`'s, otherwise
    :func:`graphopt.sim.links.modelled_ready`'s (then its arrays must be the direct links: a
    relayed send takes them hop by hop). Without ``contention`` its options are not read.
    """
    n, num_dev = comp.shape
    placement, start, finish, busy_start, busy_end, count, link_free, copy_arrival, tentative = (
        schedule_arrays(n, num_dev, contention)
    )
    preds = (pred_ptr, pred_src, pred_data)
    pair = (links.latency, links.bandwidth)
    booking = (link_free, copy_arrival, tentative)
    modelled = contention and not (links.queued and links.host < 0 and not links.per_consumer)
    booking2 = (link_free, copy_arrival, np.zeros((num_dev, num_dev), dtype=np.float64))
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
        else:  # no device has room for its parameters: the least loaded one
            room = False
            for p in range(num_dev):
                room = room or memory[p] <= 0.0 or resident[p] + params[v] <= memory[p]
            if not room:
                forced = int(np.argmin(resident))
        best_p = np.int64(-1)  # not literals (graphopt.compiled)
        best_score = np.inf
        best_est = 0.0
        best_eft = 0.0
        best_pos = np.int64(0)
        for p in range(num_dev):
            if forced >= 0 and p != forced:
                continue
            if forced < 0 and memory[p] > 0.0 and resident[p] + params[v] > memory[p]:
                continue
            if modelled:
                ready = modelled_ready(v, p, preds, placement, finish, links, booking2, False)
            else:
                ready = data_ready(v, p, preds, placement, finish, pair, contention, booking, False)
            duration = comp[v, p]
            est, pos = find_slot(busy_start, busy_end, count, p, ready, duration, max_gaps)
            score = est + duration - score_bias[v, p]
            if score < best_score:
                best_p, best_score, best_est, best_eft, best_pos = (
                    p,
                    score,
                    est,
                    est + duration,
                    pos,
                )
        if modelled:
            modelled_ready(v, best_p, preds, placement, finish, links, booking2, True)
        elif contention:
            data_ready(v, best_p, preds, placement, finish, pair, contention, booking, True)
        p = best_p
        book_interval(busy_start, busy_end, count, p, best_pos, best_est, best_eft)
        placement[v] = p
        start[v] = best_est
        finish[v] = best_eft
        resident[p] += params[v]
        if group[v] >= 0 and group_dev[group[v]] < 0:
            group_dev[group[v]] = p
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_dst[e]
            waiting[w] -= 1
            if waiting[w] == 0:
                fheap_push(h_time, h_tie, h_load, base, size, 0, -key[w], w, w)
    return placement, start, finish, order


Csr = tuple[IntArray, IntArray, IntArray, IntArray, FloatArray]
"""``(succ_ptr, succ_dst, pred_ptr, pred_src, pred_data)``: what :func:`list_schedule` reads of
the edges (the predecessor side carries each edge's data)."""


def _frozen(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array``. numba types a read-only array apart from a writable one and
    compiles a function again for each (list_schedule: seconds on a cold cache); a graph's CSR
    arrays are read-only, so the compiled functions here are given read-only arrays throughout."""
    view = array.view()
    view.flags.writeable = False
    return view


def _csr(n: int, src: IntArray, dst: IntArray, data: FloatArray) -> Csr:
    """The :data:`Csr` of edges already sorted by ``(src, dst)``, read-only as a graph's."""
    succ_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=succ_ptr[1:])
    perm = np.lexsort((src, dst))
    pred_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=pred_ptr[1:])
    return (
        _frozen(succ_ptr),
        _frozen(dst),
        _frozen(pred_ptr),
        _frozen(np.ascontiguousarray(src[perm])),
        _frozen(np.ascontiguousarray(data[perm])),
    )


def graph_csr(graph: CompGraph) -> Csr:
    """The :data:`Csr` of a graph: its CSR arrays, the data of an edge its bytes."""
    succ_ptr, succ_dst = graph.successors_csr
    pred_ptr, pred_src, pred_edge = graph.predecessors_csr
    return succ_ptr, succ_dst, pred_ptr, pred_src, np.ascontiguousarray(graph.edge_bytes[pred_edge])


def run_list_schedule(
    key: FloatArray,
    comp: FloatArray,
    csr: Csr,
    links: LinkModel,
    *,
    max_gaps: int = DEFAULT_MAX_GAPS,
    contention: bool = False,
    bias: FloatArray | None = None,
    anchor: IntArray | None = None,
    free: np.ndarray | None = None,
    params: FloatArray | None = None,
    memory: FloatArray | None = None,
    group: IntArray | None = None,
    num_groups: int = 0,
) -> tuple[IntArray, FloatArray, FloatArray, IntArray]:
    """:func:`list_schedule` with HEFT's setting for every input left out: zero ``bias``, every
    op free (``anchor`` then unused), no parameters, no memory limit, no colocation groups.
    ``links`` is the link model the schedule prices transfers with (:func:`schedule_links`; its
    options read under ``contention`` only, and other than the defaults they need the direct
    links). Returns ``(placement, start, finish, order)``."""
    n, num_dev = comp.shape
    succ_ptr, succ_dst, pred_ptr, pred_src, pred_data = (_frozen(a) for a in csr)
    return list_schedule(  # every array read-only: one compiled list_schedule (see _frozen)
        _frozen(key),
        _frozen(np.zeros((n, num_dev)) if bias is None else np.ascontiguousarray(bias)),
        _frozen(np.zeros(n, dtype=np.int64) if anchor is None else anchor),
        _frozen(np.ones(n, dtype=np.bool_) if free is None else free),
        _frozen(comp),
        succ_ptr,
        succ_dst,
        pred_ptr,
        pred_src,
        pred_data,
        links,  # writable arrays, as the stepwise decoder's and the engine's links
        max_gaps,
        contention,
        _frozen(np.zeros(n) if params is None else params),
        _frozen(np.zeros(num_dev) if memory is None else memory),
        _frozen(np.full(n, -1, dtype=np.int64) if group is None else group),
        num_groups,
    )


def _gaps(max_gaps: int | None, n: int) -> int:
    """``max_gaps`` as :func:`list_schedule` takes it (``None``: more than any timeline holds)."""
    if max_gaps is not None and max_gaps < 0:
        raise ValueError(f"max_gaps must be >= 0 or None, got {max_gaps}")
    return n + 1 if max_gaps is None else int(max_gaps)


def heft_schedule_from_costs(
    computation: object,
    edges: Sequence[tuple[int, int, float]],
    *,
    latency: object | None = None,
    bandwidth: object | None = None,
    max_gaps: int | None = DEFAULT_MAX_GAPS,
    contention: bool = False,
) -> HeftSchedule:
    """HEFT on explicit costs: the paper's setting (its Fig. 2 example is a direct call).

    Args:
        computation: ``(N, P)`` computation cost ``w[i, p]`` of task ``i`` on processor ``p``.
        edges: ``(src, dst, data)`` triples (or an ``(E, 3)`` array). Tasks must be numbered in a
            topological order (``src < dst``), each edge given once.
        latency: ``(P, P)`` link latency; default 0 everywhere.
        bandwidth: ``(P, P)`` link bandwidth; default 1 everywhere, so ``data`` is the
            communication cost itself, as in the paper. The diagonal is ignored (same processor:
            no cost).
        max_gaps: gaps examined per insertion search (``None``: all; ``0``: no insertion).
        contention: queue transfers on their links (see the module docstring).

    Returns:
        The :class:`HeftSchedule`.

    Raises:
        ValueError: bad shapes, negative or non-finite costs, an edge with ``src >= dst``, or a
            duplicate edge.
    """
    comp = np.ascontiguousarray(np.asarray(computation, dtype=np.float64))
    if comp.ndim != 2 or comp.shape[1] < 1:
        raise ValueError(
            f"computation has shape {comp.shape}; expected (num_tasks, num_processors >= 1)"
        )
    if not np.all(np.isfinite(comp)) or (comp < 0).any():
        raise ValueError("computation costs must be finite and >= 0")
    n, num_dev = comp.shape
    table = np.asarray(edges, dtype=np.float64).reshape(-1, 3) if len(edges) else np.zeros((0, 3))
    if table.shape[0] != len(edges) or not np.array_equal(table[:, :2], np.rint(table[:, :2])):
        raise ValueError("edges must be (src, dst, data) triples with integer task indices")
    src, dst = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
    data = np.ascontiguousarray(table[:, 2])
    if len(src) and (src.min() < 0 or dst.max() >= n or (src >= dst).any()):
        raise ValueError(
            f"edges must join tasks 0..{n - 1} with src < dst (tasks numbered in a topological "
            "order); renumber the tasks"
        )
    if not np.all(np.isfinite(data)) or (data < 0).any():
        raise ValueError("edge data must be finite and >= 0")
    order = np.lexsort((dst, src))
    src, dst, data = src[order], dst[order], data[order]
    if len(src) > 1 and ((src[1:] == src[:-1]) & (dst[1:] == dst[:-1])).any():
        raise ValueError("duplicate edge; give each (src, dst) pair once")
    lat = np.zeros((num_dev, num_dev)) if latency is None else np.array(latency, dtype=np.float64)
    bw = np.ones((num_dev, num_dev)) if bandwidth is None else np.array(bandwidth, dtype=np.float64)
    if lat.shape != (num_dev, num_dev) or bw.shape != (num_dev, num_dev):
        raise ValueError(f"latency and bandwidth must have shape ({num_dev}, {num_dev})")
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(bw, np.inf)
    gaps = _gaps(max_gaps, n)
    csr = _csr(n, src, dst, data)
    w_mean, c_mean = mean_costs(comp, _frozen(data), lat, bw)  # read-only as a graph's
    rank = longest_path_to_sink(csr[0], csr[1], w_mean, c_mean)
    links = link_model_of(lat, bw)
    return HeftSchedule.of(
        rank, *run_list_schedule(rank, comp, csr, links, max_gaps=gaps, contention=contention)
    )


def list_inputs(
    graph: CompGraph,
    cluster: Cluster,
    *,
    times: FloatArray | None = None,
    rank: FloatArray | None = None,
) -> ListInputs:
    """The prologue of every HEFT-like list schedule on a graph (:class:`ListInputs`): op times,
    CSR arrays, link arrays, mean op times and the upward rank. ``times`` and ``rank``, when
    given, are used as they are (already computed by the caller)."""
    comp = op_times(graph, cluster) if times is None else times
    csr = graph_csr(graph)
    latency, bandwidth = link_arrays(cluster)
    w_mean, c_mean = mean_costs(comp, graph.edge_bytes, latency, bandwidth)
    if rank is None:
        rank = longest_path_to_sink(csr[0], csr[1], w_mean, c_mean)
    return ListInputs(comp, csr, (latency, bandwidth), w_mean, rank)


def schedule_links(
    cluster: Cluster, links: tuple[FloatArray, FloatArray], contention: bool
) -> LinkModel:
    """The link model a list schedule of ``cluster`` reads. Under ``contention``, the cluster's
    (:func:`graphopt.sim.links.link_model`: the direct links, a relayed send taken hop by hop,
    and the cluster's link options). Without it, ``links`` (the prologue's, the cluster's route
    folded in: every send one figure) under the default options, which HEFT's own model does not
    read."""
    if contention:
        return link_model(cluster)
    return link_model_of(*links)


def upward_rank(graph: CompGraph, cluster: Cluster, times: FloatArray | None = None) -> FloatArray:
    """HEFT's upward rank of every op (mean op time over devices, mean link cost per edge)."""
    return list_inputs(graph, cluster, times=times).rank


def heft_schedule(
    graph: CompGraph,
    cluster: Cluster,
    *,
    max_gaps: int | None = DEFAULT_MAX_GAPS,
    contention: bool = False,
) -> HeftSchedule:
    """HEFT on a graph and cluster: ops are tasks, devices are processors, op times and link
    transfer times are the simulator's (module docstring).

    Args:
        graph: the graph.
        cluster: the devices and links.
        max_gaps: gaps examined per insertion search (``None``: all; ``0``: no insertion).
        contention: the ``heft-lc`` model: price transfers under the cluster's link model
            (:attr:`Cluster.model <graphopt.hardware.Cluster.model>`: ``contention``,
            ``route``, ``send``; at their defaults, transfers queue on their links and a tensor
            is sent once per device). Without it, HEFT's own model: every edge pays
            ``latency + bytes / bandwidth`` on the cluster's route (two hops' worth under
            ``via-host``), nothing queues.

    Placement constraints (:mod:`graphopt.constraints`): an op never goes to a device of a kind
    it may not run on (the score there is raised by :data:`graphopt.constraints.BARRED`);
    enforced colocation is left to the ``heft`` placer's projection.
    """
    rules = constraints(graph, cluster)
    gaps = _gaps(max_gaps, graph.num_ops)
    inputs = list_inputs(graph, cluster)
    bias = None if rules.allowed is None else rules.barred_bias()
    schedule = run_list_schedule(
        inputs.rank,
        inputs.comp,
        inputs.csr,
        schedule_links(cluster, inputs.links, contention),
        max_gaps=gaps,
        contention=contention,
        bias=bias,
    )
    return HeftSchedule.of(inputs.rank, *schedule)


def heft(graph: CompGraph, cluster: Cluster) -> IntArray:
    """HEFT placement (the ``"heft"`` placer): :func:`heft_schedule`'s processor per op."""
    return heft_schedule(graph, cluster).placement


def heft_contention(graph: CompGraph, cluster: Cluster) -> IntArray:
    """Link-contention-aware HEFT placement (the ``"heft-lc"`` placer; module docstring)."""
    return heft_schedule(graph, cluster, contention=True).placement
