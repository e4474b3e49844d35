"""The event-driven step-wise placement decoder: the policy's state *is* the simulator's partial
execution.

The list-scheduling decoder (:mod:`graphopt.decoders.stepwise`) decides ops in HEFT's order
against its own schedule model (insertion into idle gaps, heft-lc's link queues), which runs the
same placement 0.68-1.59x as long as the simulator does (``bench/bench_stepwise_fidelity.py``).
This decoder runs the simulator's own rules (:mod:`graphopt.sim`, rules 3-7 under the default
model: per-device sends, direct routes, one transfer at a time per link in ``(queue time,
producer)`` order, each device running its ready op of lowest topological index) and decides
each op's device at the latest instant that changes nothing the simulator would have done: when
the first of its inputs' producers finishes (sources: at time 0), before that producer's sends
are queued. So every time in the state is the simulator's, and the decoded placement's makespan
*is* its simulated step time (no fusion; memory is not modelled: an over-full device is the
simulator's to report). Ops decided at one instant are decided producer by producer (devices in
index order), each producer's consumers in index order.

Per decision, per allowed device ``d``, the features (:data:`FEATURES`; times relative to the
best device's, in percent of the critical path ``R`` (the graph's largest upward rank), through
``log(1 + x)``):

==============  ==================================================================================
``anchor``      1 if ``d`` is the reference placement's device (the best heuristic's), else 0
``eft``         estimated finish: ``max(arrival, backlog) + time(v, d)``
``arrival``     estimated arrival of ``v``'s inputs on ``d``: finished producers' data sent now
                (behind the link's current transfer), unfinished ones at their running end or
                ``now`` plus their time, plus the send where they are elsewhere (or undecided)
``backlog``     when ``d`` can start ``v``: the end of its running op plus its queued ready work
``pending``     work decided onto ``d`` that has not started yet (ready or not)
``load``        all work decided onto ``d`` so far
``bytes``       input bytes that must cross to ``d`` (from producers decided elsewhere), over the
                largest such figure among the devices
``speed``       ``time(v, d)`` relative to the fastest device's
``affinity``    ``v``'s output bytes to consumers on ``d`` (decided there, or undecided with the
                anchor's device ``d``), over the largest such figure among the devices
==============  ==================================================================================

and three figures of the anchor's own simulated schedule (:mod:`graphopt.sim.critical`; 0
without an anchor), the downstream context the partial schedule cannot show:

==============  ==================================================================================
``slack``       how long ``v`` could slip there without delaying the step (the same for every
                ``d``; in percent of ``R``, through ``log(1 + x)``)
``wait``        how long ``v`` waited there for its device once its inputs were in (same scale)
``idle``        the share of the window from ``v``'s inputs being ready to its end there during
                which ``d`` was idle
==============

A head (:class:`EventHead`: a linear rule ``theta . feat`` plus an optional hidden layer,
``w2 . relu(W feat + b1)``; the device of highest score, ties: the lowest device) or a given
placement decides. The plain-Python twin is the simulator itself: the test checks that a given
placement's makespan is its simulated step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.baselines.heft import list_inputs
from graphopt.constraints import Constraints, constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.critical import timeline_times
from graphopt.sim.engine import enqueue_transfer
from graphopt.sim.heaps import iheap_pop, iheap_push
from graphopt.sim.links import transfer_time
from graphopt.sim.simulator import PreparedGraph
from graphopt.typing import Decision, FloatArray, IntArray

FEATURES = (
    "anchor",
    "eft",
    "arrival",
    "backlog",
    "pending",
    "load",
    "bytes",
    "speed",
    "affinity",
    "slack",
    "wait",
    "idle",
)
NUM_EVENT_FEATURES = len(FEATURES)
ANCHOR = 0
"""Index of ``anchor`` in :data:`FEATURES`."""


@dataclass(frozen=True)
class EventGraph:
    """A graph on a cluster as the event-driven decoder reads it (:func:`event_graph`)."""

    graph: CompGraph
    cluster: Cluster
    arrays: tuple
    anchor: IntArray

    def anchored(self, anchor: IntArray, prepared: PreparedGraph | None = None) -> EventGraph:
        """The same graph with reference placement ``anchor``: only the anchor's figures are
        computed again (its schedule simulated on ``prepared``, a :class:`PreparedGraph` of this
        graph and cluster, or a new one), so a caller that decodes many placements of one graph
        builds the rest once (:func:`event_graph` without an anchor).

        Raises:
            ValueError: an anchor of the wrong shape or with devices out of range.
        """
        n, num_dev = self.graph.num_ops, self.cluster.num_devices
        anchor_arr = np.ascontiguousarray(anchor, dtype=np.int64).reshape(-1)
        if anchor_arr.shape != (n,) or (
            n and (anchor_arr.min() < 0 or anchor_arr.max() >= num_dev)
        ):
            raise ValueError(f"anchor must be {n} device indices in [0, {num_dev})")
        context, idle = self.arrays[12], self.arrays[13]
        if n:
            context, idle = anchor_context(
                self.graph, self.cluster, anchor_arr, self.arrays[11], prepared
            )
        arrays = (*self.arrays[:10], anchor_arr, self.arrays[11], context, idle)
        return EventGraph(self.graph, self.cluster, arrays, anchor_arr)


def unsupported(graph: CompGraph, cluster: Cluster) -> str:
    """What of ``cluster``'s model (or ``graph``'s constraints on it) the decoder cannot run, as
    ``"route: via-host of cluster 'accel-host'"``; empty when it runs the default model: no
    ``contention: none``, ``route: via-host``, ``send: per-consumer``, ``dispatch: fcfs`` or
    enforced colocation."""
    return _unsupported(cluster, constraints(graph, cluster))


def _unsupported(cluster: Cluster, rules: Constraints) -> str:
    """:func:`unsupported` with the graph's constraints on ``cluster`` already built."""
    model = cluster.model
    other = [
        option
        for option, set_ in (
            ("contention: none", not model.queued),
            ("route: via-host", model.routed),
            ("send: per-consumer", model.per_consumer),
            ("dispatch: fcfs", model.fcfs),
        )
        if set_
    ]
    if rules.group is not None and (rules.group >= 0).any():
        other.append("colocation: enforce")
    return f"{', '.join(other)} of cluster {cluster.name!r}" if other else ""


def event_graph(graph: CompGraph, cluster: Cluster, anchor: IntArray | None = None) -> EventGraph:
    """The :class:`EventGraph` of ``graph`` on ``cluster`` with reference placement ``anchor``.

    Raises:
        ValueError: a cluster whose link or dispatch model is not the default (``contention:
            none``, ``route: via-host``, ``send: per-consumer``, ``dispatch: fcfs``), enforced
            colocation, or an anchor of the wrong shape.
    """
    n, num_dev = graph.num_ops, cluster.num_devices
    rules = constraints(graph, cluster)
    other = _unsupported(cluster, rules)
    if other:
        raise ValueError(
            f"the event-driven decoder runs the simulator's default model and cannot run "
            f"{other}; use graphopt optimize"
        )
    prologue = list_inputs(graph, cluster)
    succ_ptr, succ_dst, pred_ptr, pred_src, pred_bytes = prologue.csr
    latency, bandwidth = prologue.links
    succ_bytes = np.ascontiguousarray(graph.edge_bytes, dtype=np.float64)  # edge ids = positions
    allowed = (
        np.ones((n, num_dev), dtype=np.bool_)
        if rules.allowed is None
        else np.ascontiguousarray(rules.allowed, dtype=np.bool_)
    )
    anchor_arr = np.zeros(n, dtype=np.int64)
    scale = float(prologue.rank.max()) if n else 1.0
    scale = scale if scale > 0 else 1.0
    arrays = (
        np.ascontiguousarray(prologue.comp, dtype=np.float64),
        succ_ptr,
        succ_dst,
        succ_bytes,
        pred_ptr,
        pred_src,
        np.ascontiguousarray(pred_bytes, dtype=np.float64),
        np.ascontiguousarray(latency, dtype=np.float64),
        np.ascontiguousarray(bandwidth, dtype=np.float64),
        allowed,
        anchor_arr,
        scale,
        np.zeros((n, 2)),  # no anchor: no anchor figures
        np.zeros((n, num_dev)),
    )
    plain = EventGraph(graph, cluster, arrays, anchor_arr)
    return plain if anchor is None else plain.anchored(anchor)


def anchor_context(
    graph: CompGraph,
    cluster: Cluster,
    anchor: IntArray,
    scale: float,
    prepared: PreparedGraph | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The anchor's schedule figures (module docstring): ``(N, 2)`` slack and wait, ``(N, D)``
    idle share; the schedule simulated on ``prepared`` (of ``graph`` on ``cluster``) or a new
    :class:`PreparedGraph`."""
    n, num_dev = graph.num_ops, cluster.num_devices
    prepared = prepared or PreparedGraph(graph, cluster)
    _, timeline = prepared.evaluate_timeline(Decision(placement=anchor), describe=False)
    assert timeline is not None  # no fusion: never illegal
    times = timeline_times(graph, anchor, timeline)
    context = np.stack(
        [np.log1p(100.0 * times.slack / scale), np.log1p(100.0 * times.wait / scale)], axis=1
    )
    idle = np.ones((n, num_dev))
    width = np.maximum(times.end - times.ready, 1e-30)
    for d in range(num_dev):
        on = np.flatnonzero(np.asarray(timeline.device) == d)
        if len(on):
            order = on[np.argsort(timeline.start[on])]
            starts, ends = timeline.start[order], timeline.end[order]
            busy = _busy_by(starts, ends, times.end) - _busy_by(starts, ends, times.ready)
            idle[:, d] = np.clip(1.0 - busy / width, 0.0, 1.0)
    return context, idle


def _busy_by(starts: FloatArray, ends: FloatArray, t: FloatArray) -> FloatArray:
    """A device's busy time up to each instant of ``t``, its kernels ``[starts, ends)`` sorted
    and not overlapping: the kernels that started by then, the last one up to ``t``."""
    done = np.concatenate([[0.0], np.cumsum(ends - starts)])  # busy time of the first i
    i = np.searchsorted(starts, t, side="right")
    last = np.maximum(i - 1, 0)
    running = np.clip(t - starts[last], 0.0, ends[last] - starts[last])
    return np.where(i > 0, done[last] + running, 0.0)


MODE_GIVEN, MODE_RULE = 0, 1


@njit(cache=True)
def _features(v, g, now, placement, finish, run_end, queued, pending, load, res_end, feat, mask):
    """The features of deciding ``v`` at ``now`` (module docstring) into ``feat`` ``(D, F)``,
    the allowed devices into ``mask``."""
    comp, succ_ptr, succ_dst, succ_bytes = g[0], g[1], g[2], g[3]
    pred_ptr, pred_src, pred_bytes = g[4], g[5], g[6]
    latency, bandwidth, allowed, anchor, scale = g[7], g[8], g[9], g[10], g[11]
    context, idle = g[12], g[13]
    num_dev = comp.shape[1]
    fastest = np.inf
    for d in range(num_dev):
        fastest = min(fastest, comp[v, d])
    most_bytes = 0.0
    most_near = 0.0
    for d in range(num_dev):
        mask[d] = allowed[v, d]
        arrival = now
        moved = 0.0
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_src[e]
            nbytes = pred_bytes[e]
            p = placement[u]
            if finish[u] >= 0.0:
                ready_at = finish[u]
            elif p >= 0 and run_end[u] >= 0.0:
                ready_at = run_end[u]
            elif p >= 0:
                ready_at = now + comp[u, p]
            else:
                ready_at = now + fastest
            if p != d:
                src = p if p >= 0 else (d + 1) % num_dev
                if src != d:
                    link_busy = res_end[num_dev + src * num_dev + d]
                    ready_at = max(ready_at, link_busy) + transfer_time(
                        latency, bandwidth, src, d, nbytes
                    )
                moved += nbytes
            arrival = max(arrival, ready_at)
        backlog = max(now, res_end[d]) + queued[d]
        feat[d, 0] = 1.0 if anchor[v] == d else 0.0
        feat[d, 1] = max(arrival, backlog) + comp[v, d]
        feat[d, 2] = arrival
        feat[d, 3] = backlog
        feat[d, 4] = pending[d]
        feat[d, 5] = load[d]
        feat[d, 6] = moved
        feat[d, 7] = comp[v, d]
        near = 0.0
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_dst[e]
            if (placement[w] if placement[w] >= 0 else anchor[w]) == d:
                near += succ_bytes[e]
        feat[d, 8] = near
        feat[d, 9] = context[v, 0]
        feat[d, 10] = context[v, 1]
        feat[d, 11] = idle[v, d]
        most_bytes = max(most_bytes, moved)
        most_near = max(most_near, near)
    for f in range(1, 9):  # (9-11, the anchor's schedule figures, are scaled already)
        low = np.inf
        for d in range(num_dev):
            if mask[d]:
                low = min(low, feat[d, f])
        for d in range(num_dev):
            if f == 6:
                feat[d, f] = feat[d, f] / most_bytes if most_bytes > 0 else 0.0
            elif f == 8:
                feat[d, f] = feat[d, f] / most_near if most_near > 0 else 0.0
            else:  # percent of the critical path, through log(1 + x)
                feat[d, f] = np.log1p(100.0 * (feat[d, f] - low) / scale)


@njit(cache=True)
def _decide(v, g, mode, given, head, now, state, feat, mask, ops, feats, masks, step):
    """Pick ``v``'s device (``mode``: the given one, or the head's highest score) and book it as
    decided; returns the device."""
    theta, w_feat, b1, w2 = head
    placement, finish, run_end, queued, pending, load, res_end = state
    num_dev = g[0].shape[1]
    _features(v, g, now, placement, finish, run_end, queued, pending, load, res_end, feat, mask)
    if mode == MODE_GIVEN:
        p = given[v]
    else:
        p = -1
        best = -np.inf
        for d in range(num_dev):
            if mask[d]:
                score = 0.0
                for f in range(feat.shape[1]):
                    score += theta[f] * feat[d, f]
                for h in range(b1.shape[0]):
                    a = b1[h]
                    for f in range(feat.shape[1]):
                        a += feat[d, f] * w_feat[f, h]
                    if a > 0.0:
                        score += w2[h] * a
                if score > best:
                    best, p = score, d
    if feats.shape[0] > 0:
        ops[step] = v
        for d in range(num_dev):
            masks[step, d] = mask[d]
            for f in range(feat.shape[1]):
                feats[step, d, f] = feat[d, f]
    placement[v] = p
    pending[p] += g[0][v, p]
    load[p] += g[0][v, p]
    return p


@njit(cache=True)
def run_events(g, mode, given, head, ops, feats, masks):
    """One episode (module docstring): ``mode`` :data:`MODE_GIVEN` (devices of ``given``) or
    :data:`MODE_RULE` (the head: ``(theta, w_feat, b1, w2)``, :class:`EventHead`). When ``feats`` has rows, decision ``k``'s op,
    features and mask are written to ``ops[k]``, ``feats[k]``, ``masks[k]``.

    Returns ``(placement, makespan)``."""
    comp, succ_ptr, succ_dst, succ_bytes, pred_ptr = g[0], g[1], g[2], g[3], g[4]
    latency, bandwidth = g[7], g[8]
    n, num_dev = comp.shape
    num_r = num_dev + num_dev * num_dev  # devices, then links s * D + t
    placement = np.full(n, -1, dtype=np.int64)
    finish = np.full(n, -1.0)
    run_end = np.full(n, -1.0)
    queued = np.zeros(num_dev)
    pending = np.zeros(num_dev)
    load = np.zeros(num_dev)
    res_end = np.zeros(num_r)  # end of the running job (the last one, when idle)
    busy = np.zeros(num_r, dtype=np.bool_)
    job = np.zeros(num_r, dtype=np.int64)
    state = (placement, finish, run_end, queued, pending, load, res_end)
    need = np.zeros(n, dtype=np.int64)
    for v in range(n):
        need[v] = pred_ptr[v + 1] - pred_ptr[v]
    # ready ops per device: heap d in [d * n, (d + 1) * n), key the op (its topological index)
    heap = np.empty(num_dev * max(n, 1), dtype=np.int64)
    heap_base = np.arange(num_dev) * max(n, 1)
    size = np.zeros(num_dev, dtype=np.int64)
    # link queues as the simulator keeps them (engine.enqueue_transfer), link r - D in
    # [(r - D) * n, (r - D + 1) * n): at most one send of each producer per link
    num_l = num_dev * num_dev
    lq = (
        np.empty(num_l * max(n, 1)),
        np.empty(num_l * max(n, 1), dtype=np.int64),
        np.empty(num_l * max(n, 1), dtype=np.int64),
        np.empty(num_l * max(n, 1)),
        np.empty(num_l * max(n, 1)),
    )
    l_head = np.arange(num_l) * max(n, 1)
    l_tail = l_head.copy()
    feat = np.zeros((num_dev, NUM_EVENT_FEATURES))
    mask = np.zeros(num_dev, dtype=np.bool_)
    dev_bytes = np.zeros(num_dev)
    step = 0
    for v in range(n):  # sources: decided at time 0, ready at once
        if need[v] == 0:
            p = _decide(v, g, mode, given, head, 0.0, state, feat, mask, ops, feats, masks, step)
            step += 1
            iheap_push(heap, heap_base, size, p, v)
            queued[p] += comp[v, p]
    now = 0.0
    makespan = 0.0
    while True:
        # dispatch: every idle resource with work starts its next job at `now`
        for r in range(num_r):
            if busy[r]:
                continue
            if r < num_dev:
                if size[r] == 0:
                    continue
                v = iheap_pop(heap, heap_base, size, r)
                queued[r] -= comp[v, r]
                pending[r] -= comp[v, r]
                job[r] = v
                res_end[r] = now + comp[v, r]
                run_end[v] = res_end[r]
                busy[r] = True
            else:
                j = r - num_dev
                if l_head[j] == l_tail[j]:
                    continue
                i = l_head[j]
                l_head[j] += 1
                job[r] = lq[1][i]  # the producer
                res_end[r] = now + lq[3][i]
                busy[r] = True
        nxt = np.inf
        for r in range(num_r):
            if busy[r] and res_end[r] < nxt:
                nxt = res_end[r]
        if nxt == np.inf:
            break
        now = nxt
        # complete every job ending at `now` before the next dispatch
        for r in range(num_r):
            if not busy[r] or res_end[r] != now:
                continue
            busy[r] = False
            u = job[r]
            if r < num_dev:
                d = r
                finish[u] = now
                makespan = max(makespan, now)
                for e in range(succ_ptr[u], succ_ptr[u + 1]):  # decide the undecided consumers
                    w = succ_dst[e]
                    if placement[w] < 0:
                        _decide(
                            w, g, mode, given, head, now, state, feat, mask, ops, feats, masks,
                            step,
                        )  # fmt: skip
                        step += 1
                for t in range(num_dev):
                    dev_bytes[t] = -1.0
                for e in range(succ_ptr[u], succ_ptr[u + 1]):
                    w = succ_dst[e]
                    t = placement[w]
                    if t == d:
                        need[w] -= 1
                        if need[w] == 0:
                            iheap_push(heap, heap_base, size, t, w)
                            queued[t] += comp[w, t]
                    else:  # one send per remote device, sized by its largest edge
                        dev_bytes[t] = max(dev_bytes[t], succ_bytes[e])
                for t in range(num_dev):
                    if dev_bytes[t] >= 0.0:
                        dur = transfer_time(latency, bandwidth, d, t, dev_bytes[t])
                        enqueue_transfer(
                            lq, l_head, l_tail, d * num_dev + t, now, u, u, dur, dev_bytes[t]
                        )
            else:
                t = (r - num_dev) % num_dev
                for e in range(succ_ptr[u], succ_ptr[u + 1]):
                    w = succ_dst[e]
                    if placement[w] == t:
                        need[w] -= 1
                        if need[w] == 0:
                            iheap_push(heap, heap_base, size, t, w)
                            queued[t] += comp[w, t]
    return placement, makespan


@dataclass(frozen=True)
class EventHead:
    """A device-scoring head: ``theta . feat[d] + w2 . relu(w_feat^T feat[d] + b1)`` (float64;
    ``theta`` ``(F,)``, ``w_feat`` ``(F, H)``, ``b1`` and ``w2`` ``(H,)``; ``H = 0``: the
    linear rule alone)."""

    theta: FloatArray
    w_feat: FloatArray
    b1: FloatArray
    w2: FloatArray

    @staticmethod
    def linear(theta: FloatArray) -> EventHead:
        """The linear rule ``theta``.

        Raises:
            ValueError: ``theta`` without one weight per feature.
        """
        theta = np.asarray(theta, dtype=np.float64).reshape(-1)
        if theta.shape != (NUM_EVENT_FEATURES,):
            raise ValueError(f"theta has {theta.size} weights; expected {NUM_EVENT_FEATURES}")
        return EventHead(theta, np.zeros((NUM_EVENT_FEATURES, 0)), np.zeros(0), np.zeros(0))

    def arrays(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """The weights as :func:`run_events` reads them.

        Raises:
            ValueError: weights of inconsistent shapes.
        """
        theta, w_feat, b1, w2 = (
            np.ascontiguousarray(a, dtype=np.float64)
            for a in (self.theta, self.w_feat, self.b1, self.w2)
        )
        hidden = b1.shape[0] if b1.ndim == 1 else -1
        if (
            theta.shape != (NUM_EVENT_FEATURES,)
            or w_feat.shape != (NUM_EVENT_FEATURES, hidden)
            or w2.shape != (hidden,)
        ):
            raise ValueError(
                f"head weights of shapes {theta.shape}, {w_feat.shape}, {b1.shape}, {w2.shape}; "
                f"expected ({NUM_EVENT_FEATURES},), ({NUM_EVENT_FEATURES}, H), (H,), (H,)"
            )
        return theta, w_feat, b1, w2


@dataclass(frozen=True)
class EventEpisode:
    """One decoded episode: decision ``k`` placed ``ops[k]`` seeing ``feats[k]`` ``(D, F)``
    with ``masks[k]``; ``makespan`` is the simulated step time of ``placement`` (no fusion)."""

    ops: IntArray
    feats: np.ndarray
    masks: np.ndarray
    placement: IntArray
    makespan: float


def decode_events(
    eg: EventGraph,
    head: EventHead | None = None,
    *,
    theta: FloatArray | None = None,
    given: IntArray | None = None,
    record: bool = False,
) -> EventEpisode:
    """Run one episode of the event-driven decoder: with ``head``, the linear rule ``theta``
    (:data:`NUM_EVENT_FEATURES` weights: ``EventHead.linear(theta)``) or the devices of
    ``given``; ``record`` keeps every decision's features.

    Raises:
        ValueError: not exactly one of ``head``, ``theta`` and ``given``, or one of the wrong
            shape.
    """
    n, num_dev = eg.graph.num_ops, eg.cluster.num_devices
    if sum(x is not None for x in (head, theta, given)) != 1:
        raise ValueError("decode_events needs exactly one of head, theta (a rule) and given")
    if theta is not None:
        head = EventHead.linear(theta)
    given_arr = np.zeros(0, dtype=np.int64)
    if given is not None:
        given_arr = np.ascontiguousarray(given, dtype=np.int64).reshape(-1)
        if given_arr.shape != (n,) or (n and (given_arr.min() < 0 or given_arr.max() >= num_dev)):
            raise ValueError(f"given must be {n} device indices in [0, {num_dev})")
    arrays = (head or EventHead.linear(np.zeros(NUM_EVENT_FEATURES))).arrays()
    rows = n if record else 0
    ops = np.zeros(rows, dtype=np.int64)
    feats = np.zeros((rows, num_dev, NUM_EVENT_FEATURES))
    masks = np.zeros((rows, num_dev), dtype=np.bool_)
    placement, makespan = run_events(
        eg.arrays,
        MODE_GIVEN if given is not None else MODE_RULE,
        given_arr,
        arrays,
        ops,
        feats,
        masks,
    )
    return EventEpisode(ops, feats, masks, placement, float(makespan))
