"""The analytic schedule estimates: a step time without simulation.

Three estimates of a placement's step time, each one sweep over the ops in topological order
(``numba``), for a whole batch of placements at once:

- :func:`path_lengths`: the critical path with the placement's op and transfer times, and the
  length of a list schedule in topological order (no link queueing);
- :func:`contention_schedule`: an insertion list schedule with link contention (HEFT's
  earliest-finish-time rule on devices and links, Sinnen & Sousa 2005);
- :class:`PlacementEstimate`: the contention schedule with the out-of-memory rule of parameters
  (:func:`device_param_bytes`), ``(B, N)`` placements to ``(B,)`` seconds, and
  :class:`EstimateCostModel`, the same as a :class:`~graphopt.typing.CostModel`.

They ignore memory beyond parameters, priorities, fusion and the simulator's event-driven
dispatch, which is what makes them cheap: the learned cost model corrects the contention schedule
(:mod:`graphopt.costmodel.features`), the placement-edit environment prices its candidate moves
with it (:mod:`envs.placement_edit`) and estimate search climbs on it
(:mod:`graphopt.baselines.estimate_search`). The per-op twins are in
``tests/graphopt/sim/test_estimate.py`` and ``tests/graphopt/costmodel/test_features.py``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.compiled import INTERNAL
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.links import (
    book_interval,
    earliest_gap,
    first_hop,
    hop_time_by_inverse,
    inverse_bandwidth,
    link_arrays,
    link_model,
    transfer_time_by_inverse,
)
from graphopt.sim.simulator import PreparedGraph
from graphopt.typing import Decision, FloatArray, IntArray, Measurement

INSERTION_WINDOW = 64
"""How many of a resource's latest busy intervals :func:`contention_schedule` searches for a gap."""


@njit(cache=True)
def path_lengths(place, op_time, pred_ptr, pred_src, pred_edge, nbytes, latency, inv_bw):
    """``(B, 2)`` per decision: the critical path and the list-schedule length, in one forward
    sweep over the ops in topological order.

    - critical path: ``finish[v] = time[v, d_v] + max_u (finish[u] + comm(u, v))``;
    - list schedule in topological order: op ``v`` starts at ``max(inputs arrived, its device
      free)``, ``finish[v] = start + time[v, d_v]``, and its device is busy until then. This is
      the schedule-length estimate of list schedulers such as HEFT, with a static order where
      the simulator picks the ready op with the lowest (priority, topological index) whenever a
      device falls idle; priorities are ignored here.

    ``comm = latency + bytes / bandwidth`` across devices, 0 on one device; no link queueing.
    ``latency`` and ``inv_bw`` are the route's (:func:`estimate_links` with ``route=None``):
    under ``route: via-host`` a relayed edge pays both hops.
    """
    b, n = place.shape
    out = np.zeros((b, 2))
    path = np.zeros(n)
    listed = np.zeros(n)
    for k in range(b):
        free = np.zeros(latency.shape[0])
        for v in range(n):
            dv = place[k, v]
            ready_path = 0.0
            ready_list = 0.0
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_src[j]
                comm = transfer_time_by_inverse(
                    latency, inv_bw, place[k, u], dv, nbytes[pred_edge[j]]
                )
                ready_path = max(ready_path, path[u] + comm)
                ready_list = max(ready_list, listed[u] + comm)
            path[v] = ready_path + op_time[v, dv]
            listed[v] = max(ready_list, free[dv]) + op_time[v, dv]
            free[dv] = listed[v]
            out[k, 0] = max(out[k, 0], path[v])
            out[k, 1] = max(out[k, 1], listed[v])
    return out


@njit(cache=True, **INTERNAL)
def _book(start, end, count, r, ready, duration, window):
    """Book ``duration`` seconds on resource ``r`` at the earliest time ``>= ready`` that fits in a
    gap before one of its last ``window`` busy intervals, or else after its last one
    (:func:`~graphopt.sim.links.earliest_gap`); return the finish time. Row ``r`` of
    ``start``/``end`` holds the busy intervals sorted by start, ``count[r]`` of them; when the row
    is full, only the newest ``window + 1`` are kept (older ones are never searched again)."""
    m = count[r]
    if m == start.shape[1]:
        keep = window + 1
        for i in range(keep):
            start[r, i] = start[r, m - keep + i]
            end[r, i] = end[r, m - keep + i]
        m = keep
        count[r] = m
    begin, pos = earliest_gap(start, end, count, r, ready, duration, max(0, m - window), m)
    book_interval(start, end, count, r, pos, begin, begin + duration)
    return begin + duration


@njit(cache=True, inline="always", **INTERNAL)
def _send(start, end, count, links, origin, src, dst, ready, nbytes, window):
    """The hop ``src -> dst`` of a send of ``nbytes`` from device ``origin``, sent at ``ready``
    and priced by :func:`~graphopt.sim.links.hop_time_by_inverse`: booked on the directed link
    (resource ``D + src * D + dst``) when ``links.queued``, else at once; its arrival.
    Inlined: as a call taking the link model by value, it made :class:`PlacementEstimate`
    about 8% slower (``rnnlm-8``, 16 random placements)."""
    d = links.latency.shape[0]
    seconds = hop_time_by_inverse(links, origin, src, dst, nbytes)
    if not links.queued:
        return ready + seconds
    return _book(start, end, count, d + src * d + dst, ready, seconds, window)


@njit(cache=True)
def contention_schedule(place, op_time, succ_ptr, succ_dst, nbytes, links, window):
    """``(B,)`` schedule length per decision of an insertion list schedule with link contention.

    Ops are taken in topological order. Op ``v`` is booked on its device at the earliest time its
    inputs have arrived and the device has a free gap of ``time[v, d_v]`` (insertion policy, as in
    HEFT's earliest-finish-time rule; only the device's last ``window`` busy intervals are searched
    for a gap). When ``v`` finishes, one transfer per remote device that consumes it (the largest
    of its edges to that device, as in the simulator) is booked on the directed link the same way,
    lasting ``latency + bytes / bandwidth``; the consumers there see the input when it lands
    (contention-aware scheduling, Sinnen & Sousa 2005). Memory, priorities, fusion and the
    simulator's event-driven dispatch are not modelled. ``O(B (N + E) window)``.

    The cluster's link model (``links``, a :class:`~graphopt.typing.LinkModel`:
    :func:`graphopt.sim.links.link_model`; rules 5a-5d of :mod:`graphopt.sim`), the default
    options giving the schedule above: not ``queued`` (``contention: none``) lands every
    transfer ``latency + bytes / bandwidth`` after it is sent, no link booked;
    ``per_consumer`` (``send: per-consumer``) sends once per remote consuming edge, with that
    edge's bytes, in successor order; ``host >= 0`` (``route: via-host``) sends between two
    non-host devices in two hops through ``host`` (:func:`graphopt.sim.links.first_hop`), the
    second sent when the first lands (per device: one upload per op to the host, sized by the
    largest of its edges to the host and to every relayed device, then one hop per relayed
    device; per consumer: two hops per edge). Every hop is priced by
    :func:`graphopt.sim.links.hop_time_by_inverse`.

    Args:
        place: ``(B, N)`` int64 devices. op_time: ``(N, D)`` seconds. succ_ptr, succ_dst: the
        successor CSR, edge ids = positions. nbytes: ``(E,)`` edge bytes. links: the link model
        (the direct links and the options). window: gap search depth.
    """
    host = links.host
    per_consumer = links.per_consumer
    b, n = place.shape
    d = links.latency.shape[0]
    out = np.zeros(b)
    arrive = np.zeros(n)
    hops = np.empty((d, d), dtype=np.int64)  # hops[s, t]: where a send from s to t goes first
    relays = np.zeros(d, dtype=np.bool_)  # relays[s]: some send from s is relayed
    for s in range(d):
        for t in range(d):
            hops[s, t] = first_hop(host, s, t) if s != t else t
            relays[s] = relays[s] or hops[s, t] != t
    sent = np.empty(d)
    first = np.full(d, -1.0)  # bytes of each first hop (-1: none), reset after its send
    hop_landed = np.empty(d)
    landed = np.empty(d)
    start = np.empty((d + d * d, 2 * (window + 1)))
    end = np.empty_like(start)
    count = np.zeros(d + d * d, dtype=np.int64)
    for k in range(b):
        count[:] = 0
        arrive[:] = 0.0
        for v in range(n):
            dv = place[k, v]
            finish = _book(start, end, count, dv, arrive[v], op_time[v, dv], window)
            out[k] = max(out[k], finish)
            if per_consumer:  # one send per remote edge, each routed on its own
                for e in range(succ_ptr[v], succ_ptr[v + 1]):
                    w = succ_dst[e]
                    dw = place[k, w]
                    if dw == dv:
                        arrive[w] = max(arrive[w], finish)
                        continue
                    ready = finish
                    src = dv
                    hop = hops[dv, dw]
                    if hop != dw:  # relayed: first hop to the host
                        ready = _send(
                            start, end, count, links, dv, dv, hop, finish, nbytes[e], window
                        )
                        src = hop
                    land = _send(start, end, count, links, dv, src, dw, ready, nbytes[e], window)
                    arrive[w] = max(arrive[w], land)
                continue
            sent[:] = -1.0
            if not relays[dv]:  # every send on its direct link
                for e in range(succ_ptr[v], succ_ptr[v + 1]):
                    w = succ_dst[e]
                    dw = place[k, w]
                    if dw == dv:
                        arrive[w] = max(arrive[w], finish)
                    elif nbytes[e] > sent[dw]:
                        sent[dw] = nbytes[e]
                for t in range(d):
                    if sent[t] >= 0.0:
                        landed[t] = _send(
                            start, end, count, links, dv, dv, t, finish, sent[t], window
                        )
            else:
                # one send per first hop, sized by the largest send it carries (one upload to
                # the host, shared by every relayed device; the loop above written out again,
                # as the direct case's loop ran slower with the branch in it) ...
                for e in range(succ_ptr[v], succ_ptr[v + 1]):
                    w = succ_dst[e]
                    dw = place[k, w]
                    if dw == dv:
                        arrive[w] = max(arrive[w], finish)
                        continue
                    if nbytes[e] > sent[dw]:
                        sent[dw] = nbytes[e]
                    hop = hops[dv, dw]
                    first[hop] = max(first[hop], nbytes[e])
                for t in range(d):
                    if first[t] >= 0.0:
                        hop_landed[t] = _send(
                            start, end, count, links, dv, dv, t, finish, first[t], window
                        )
                        first[t] = -1.0
                # ... then the second hops, each from the host once its upload has landed
                for t in range(d):
                    if sent[t] >= 0.0:
                        hop = hops[dv, t]
                        if hop == t:
                            landed[t] = hop_landed[t]
                        else:
                            landed[t] = _send(
                                start, end, count, links, dv, hop, t, hop_landed[hop], sent[t],
                                window,
                            )  # fmt: skip
            for e in range(succ_ptr[v], succ_ptr[v + 1]):
                dw = place[k, succ_dst[e]]
                if dw != dv:
                    arrive[succ_dst[e]] = max(arrive[succ_dst[e]], landed[dw])
    return out


def estimate_links(
    cluster: Cluster, *, route: str | None = "direct"
) -> tuple[np.ndarray, np.ndarray]:
    """``(latency, inverse bandwidth)``, both ``(D, D)`` contiguous float64 (s and s/byte; zero
    on the diagonal) of :func:`~graphopt.sim.links.link_arrays` on ``route``. The default,
    the cluster's own links, are the figures of the link model :func:`contention_schedule`
    takes (:func:`~graphopt.sim.links.link_model`: the via-host route hop by hop);
    ``route=None`` (the cluster's route: two hops folded into one figure under ``via-host``) is
    what a per-edge price without queueing takes, :func:`path_lengths` and the cost model's
    per-edge features."""
    latency, bandwidth = link_arrays(cluster, route=route)
    return latency, inverse_bandwidth(bandwidth)


def device_param_bytes(
    placements: IntArray, param_bytes: np.ndarray, num_devices: int
) -> np.ndarray:
    """``(B, D)`` parameter bytes each of ``B`` placements ``(B, N)`` puts on each device: the
    memory a placement needs at the least (activations come on top), the out-of-memory rule of
    the learned cost model and of the analytic estimate's search."""
    place = np.asarray(placements, dtype=np.int64)
    b = len(place)
    rows = np.arange(b)[:, None] * num_devices
    return np.bincount(
        (rows + place).reshape(-1),
        weights=np.broadcast_to(param_bytes, place.shape).reshape(-1),
        minlength=b * num_devices,
    ).reshape(b, num_devices)


class PlacementEstimate:
    """``(B, N)`` placements -> ``(B,)`` estimated step times (s): the insertion schedule of
    :func:`contention_schedule` under the cluster's link model (``contention``, ``route``,
    ``send``; the defaults as before) (the same as
    ``DecisionFeaturizer.insertion_schedule``, without its device limit), ``inf`` where a device's
    parameter bytes exceed its memory.

    ``window`` is the schedule's gap search depth (default
    :data:`INSERTION_WINDOW`); ``window=0`` gives the append-only
    schedule, each op after the last one booked on its device, in topological order.
    """

    def __init__(self, graph: CompGraph, cluster: Cluster, window: int | None = None) -> None:
        if window is not None and window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        self.window = INSERTION_WINDOW if window is None else int(window)

        self.op_time = np.ascontiguousarray(PreparedGraph(graph, cluster).op_time)
        self.succ_ptr, self.succ_dst = graph.successors_csr
        self.nbytes = np.asarray(graph.edge_bytes, dtype=np.float64)
        self.links = link_model(cluster)
        self.param_bytes = np.asarray(graph.param_bytes, dtype=np.float64)
        self.memory = np.asarray(cluster.memory, dtype=np.float64)
        self.num_devices = cluster.num_devices

    def __call__(self, placements: IntArray) -> FloatArray:
        place = np.ascontiguousarray(placements, dtype=np.int64)
        params = device_param_bytes(place, self.param_bytes, self.num_devices)
        fits = (params <= self.memory[None, :]).all(axis=1)
        return np.where(fits, self.schedule(place), np.inf)

    def schedule(self, placements: IntArray) -> FloatArray:
        """``(B,)`` seconds: the contention schedule of ``(B, N)`` placements, memory ignored."""
        return contention_schedule(
            np.ascontiguousarray(placements, dtype=np.int64),
            self.op_time,
            self.succ_ptr,
            self.succ_dst,
            self.nbytes,
            self.links,
            self.window,
        )


class EstimateCostModel:
    """:class:`PlacementEstimate` as a :class:`~graphopt.typing.CostModel`: the contention schedule
    of ``decision.placement`` (all on device 0 when absent) as the step time. Priorities and fusion
    are ignored; a placement whose parameters do not fit is invalid ("out of memory")."""

    def __init__(self, window: int | None = None) -> None:
        self.window = window

    def evaluate(self, graph: CompGraph, cluster: Cluster, decision: Decision) -> Measurement:
        place = (
            np.zeros(graph.num_ops, np.int64) if decision.placement is None else decision.placement
        )
        seconds = float(PlacementEstimate(graph, cluster, self.window)(np.asarray(place)[None])[0])
        d = cluster.num_devices
        if np.isfinite(seconds):
            return Measurement(seconds, np.zeros(d), np.zeros(d), 0.0, True, "")
        return Measurement(
            np.inf, np.zeros(d), np.zeros(d), 0.0, False, "out of memory: parameters"
        )
