"""The step-wise placement decoder: a list scheduler that asks a policy for the device of each op,
one op per step, showing it the partial schedule.

This is GO's placement head made state-aware, as DOPPLER, Decima and L2D decide: the ops are
taken in the list scheduler's order (the ready op of highest upward rank, HEFT's order: the
scheduler picks the op), and at each step the policy picks the device among the allowed ones,
reading for every candidate device the features of :data:`SCHEDULE_FEATURES` of the schedule
built so far. With the policy "pick the anchor device" (the best heuristic's, feature
``anchor``) the decoded placement is the anchor exactly; with "pick the lowest EFT" it is HEFT's
(link-contention-aware, ``heft-lc``, with ``contention=True``).

Time-like features are in percent of ``R``, the critical path of mean costs (HEFT's largest
upward rank), through :func:`~graphopt.encoding.symlog`, so graphs of any scale give features of
one range. Per step and device ``p`` (``v`` the op to place):

=================  ================================================================================
feature            value
=================  ================================================================================
``est``            ``symlog(100 (EST(v, p) - min_q EST(v, q)) / R)``: insertion start, relative
``eft``            same for the finish ``EFT = EST + w[v, p]`` (0 on HEFT's device)
``ready``          same for the data-ready time (inputs arrived on ``p``)
``bound``          same for the bound ``max(makespan, EFT + rank(v) - w̄(v))`` on the step time if
                   ``v`` goes to ``p`` (its successors' critical path after it)
``growth``         ``symlog(100 max(0, EFT - makespan) / R)``: how far the schedule grows
``vs_anchor``      ``symlog(100 (EFT(v, p) - EFT(v, anchor)) / R)``
``duration``       ``log2(w[v, p] / min_q w[v, q])``: the device's relative speed for ``v``
``moved``          share of ``v``'s input bytes not already on ``p`` (sent there for ``v``)
``headroom``       ``(memory - resident parameters - params(v)) / memory`` (1 with no limit)
``load``           ``symlog(100 (busy(p) - mean_q busy(q)) / R)``: the device's work so far
``rank``           ``rank(v) / R``: the critical path still ahead of ``v``
``progress``       share of ops placed
``is_min_eft``     1 on the device of lowest EFT (HEFT's choice; ties: lower device)
``anchor``         1 on the anchor's device (the reference placement), 0 elsewhere
``near``           ``log2`` of the mean bandwidth from ``p`` to the other devices, weighted by the
                   work placed on them so far, over the cluster's fastest link (0 before any
                   work elsewhere; at least -10): which of two otherwise equal devices is closer
                   to the work, e.g. two idle GPUs of a DGX-1 quad with one and two NVLinks to
                   the busy ones
=================  ================================================================================

Masks: a device the op may not use (placement constraints), a device other than its enforced
colocation group's once one of the group is placed, and a device whose resident parameters the op
would push past its memory (none left: only the least loaded one) are not allowed. A cluster
with ``contiguous: true`` is refused (one line): which devices keep the stages contiguous
depends on blocks not yet placed, which a step cannot see.

The schedule's state lives in arrays (the tuple of :func:`new_state`), updated in place by
compiled functions: :func:`candidates` fills the features and mask of the next op,
:func:`commit` books it on a device. :func:`run_episode` runs a whole episode with the policy's
head (:class:`HeadParams`, a one-hidden-layer MLP over an op's embedding projection and the
features) evaluated inside the loop, so a rollout makes no Python call per op. The readable twin
of the state updates and features is in ``tests/graphopt/decoders/test_stepwise.py``.

Rewards (:func:`bound`): the bound ``max over placed u of finish(u) + rank(u) - w̄(u)`` never
falls and ends at the decoder's makespan; its change per step, over the reference's step time, is
a per-step cost that sums to the estimated step time (L2D's shaping), and the environment adds
the difference to the simulated step time at the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from graphopt.baselines.heft import DEFAULT_MAX_GAPS, data_ready, list_inputs, schedule_arrays
from graphopt.compiled import INTERNAL
from graphopt.constraints import constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.links import book_interval, find_slot
from graphopt.typing import FloatArray, IntArray

SCHEDULE_FEATURES = (
    "est",
    "eft",
    "ready",
    "bound",
    "growth",
    "vs_anchor",
    "duration",
    "moved",
    "headroom",
    "load",
    "rank",
    "progress",
    "is_min_eft",
    "anchor",
    "near",
)
"""Per (op, candidate device) features of the partial schedule (module docstring)."""
NUM_FEATURES = len(SCHEDULE_FEATURES)
ANCHOR_FEATURE = SCHEDULE_FEATURES.index("anchor")

MODE_SAMPLE, MODE_GREEDY, MODE_ANCHOR, MODE_GIVEN = 0, 1, 2, 3
"""How :func:`run_episode` picks a device: sample the head's softmax, its argmax, the anchor's
device, or the devices of a given placement (the features of that decision's states)."""


@dataclass(frozen=True)
class StepGraph:
    """What the step-wise decoder reads of one (graph, cluster) pair, computed once.

    Attributes:
        graph: the graph.
        cluster: the cluster.
        arrays: the tuple the compiled functions take (see :func:`step_graph`).
        rank: HEFT's upward rank ``(N,)``; the op order is by it.
        scale: ``R``, the largest upward rank (seconds).
        anchor: the reference placement ``(N,)`` (all zeros when none was given).
    """

    graph: CompGraph
    cluster: Cluster
    arrays: tuple
    rank: FloatArray
    scale: float
    anchor: IntArray

    @property
    def num_ops(self) -> int:
        return self.graph.num_ops

    @property
    def num_devices(self) -> int:
        return self.cluster.num_devices


def step_graph(
    graph: CompGraph,
    cluster: Cluster,
    anchor: IntArray | None = None,
    *,
    contention: bool = True,
    max_gaps: int = DEFAULT_MAX_GAPS,
) -> StepGraph:
    """The :class:`StepGraph` of ``graph`` on ``cluster`` with the reference placement ``anchor``.

    Args:
        graph: the graph.
        cluster: its devices and links (as the heuristics price them: :mod:`graphopt.sim.links`).
        anchor: the reference placement whose devices the ``anchor`` feature marks; None: none
            (the feature is 0 everywhere).
        contention: queue transfers on their links, as ``heft-lc`` does (closer to the simulator).
        max_gaps: idle gaps examined per insertion search (HEFT's bound).

    Raises:
        ValueError: an anchor of the wrong shape or out of range; placement constraints no
            placement can meet; a cluster with ``contiguous: true``; under ``contention``, a
            cluster whose link model the decoder does not price (``contention: none``, ``route:
            via-host``, ``send: per-consumer``: it would price them as the defaults).
    """
    n, num_dev = graph.num_ops, cluster.num_devices
    prologue = list_inputs(graph, cluster)
    comp, rank, w_mean = prologue.comp, prologue.rank, prologue.w_mean
    succ_ptr, succ_dst, pred_ptr, pred_src, pred_data = prologue.csr
    latency, bandwidth = prologue.links
    scale = float(rank.max()) if n else 1.0
    scale = scale if scale > 0 else 1.0
    model = cluster.model
    unmodelled = [
        option
        for option, set_ in (
            ("contention: none", not model.queued),
            ("route: via-host", model.routed),
            ("send: per-consumer", model.per_consumer),
        )
        if set_
    ]
    if contention and unmodelled:
        raise ValueError(
            f"the step-wise decoder queues transfers as heft-lc does under the default link "
            f"model and cannot price {', '.join(unmodelled)} of cluster {cluster.name!r}; use "
            "graphopt optimize (the placement decoder honours it) or a cluster without it"
        )
    rules = constraints(graph, cluster)
    if rules.contiguous:
        raise ValueError(
            f"the step-wise decoder places one op at a time and cannot keep the contiguous stages "
            f"that cluster {cluster.name!r} demands (contiguous: true); use the placement decoder "
            "or annealing, or set contiguous: false"
        )
    allowed = (
        np.ones((n, num_dev), dtype=np.bool_)
        if rules.allowed is None
        else np.ascontiguousarray(rules.allowed, dtype=np.bool_)
    )
    group = (
        np.full(n, -1, dtype=np.int64)
        if rules.group is None
        else np.ascontiguousarray(rules.group, dtype=np.int64)
    )
    num_groups = int(group.max()) + 1 if n and group.max() >= 0 else 0
    if anchor is None:
        anchor_arr = np.zeros(n, dtype=np.int64)
        has_anchor = False
    else:
        anchor_arr = np.ascontiguousarray(anchor, dtype=np.int64).reshape(-1)
        if anchor_arr.shape != (n,) or (
            n and (anchor_arr.min() < 0 or anchor_arr.max() >= num_dev)
        ):
            raise ValueError(
                f"anchor must be {n} device indices in [0, {num_dev}) for {graph.name!r} on "
                f"{cluster.name!r}, got shape {anchor_arr.shape}"
            )
        has_anchor = True
    memory = np.array(
        [d.memory if np.isfinite(d.memory) else 0.0 for d in cluster.devices], dtype=np.float64
    )
    between = bandwidth[~np.eye(num_dev, dtype=bool)]
    between = between[np.isfinite(between)]
    fastest = float(between.max()) if between.size else 0.0  # the fastest link (``near``)
    arrays = (
        comp,
        succ_ptr,
        succ_dst,
        pred_ptr,
        pred_src,
        np.ascontiguousarray(pred_data, dtype=np.float64),
        latency,
        bandwidth,
        np.ascontiguousarray(graph.param_bytes, dtype=np.float64),
        memory,
        group,
        max(num_groups, 1),
        allowed,
        anchor_arr,
        has_anchor,
        rank,
        w_mean,
        scale,
        bool(contention),
        int(max_gaps),
        fastest,
    )
    return StepGraph(graph, cluster, arrays, rank, scale, anchor_arr)


# ---------------------------------------------------------------------------- compiled core
@njit(cache=True)
def new_state(g):
    """A fresh schedule state for the graph arrays ``g`` (:func:`step_graph`): nothing placed, the
    sources in the ready heap. A tuple of arrays, updated in place by :func:`commit`."""
    comp, pred_ptr = g[0], g[3]
    num_groups, rank, contention = g[11], g[15], g[18]
    n, num_dev = comp.shape
    placement, start, finish, busy_start, busy_end, count, link_free, copy_arrival, tentative = (
        schedule_arrays(n, num_dev, contention)
    )
    resident = np.zeros(num_dev, dtype=np.float64)
    busy = np.zeros(num_dev, dtype=np.float64)
    group_dev = np.full(num_groups, -1, dtype=np.int64)
    waiting = np.zeros(n, dtype=np.int64)
    h_key = np.empty(max(n, 1), dtype=np.float64)
    h_tie = np.empty(max(n, 1), dtype=np.int64)
    h_op = np.empty(max(n, 1), dtype=np.int64)
    size = np.zeros(1, dtype=np.int64)
    # scalars: [makespan, bound, placed ops]
    scalars = np.zeros(3, dtype=np.float64)
    # scratch of the last candidates() call: EST, insert position, EFT per device
    est = np.zeros(num_dev, dtype=np.float64)
    pos = np.zeros(num_dev, dtype=np.int64)
    eft = np.zeros(num_dev, dtype=np.float64)
    for v in range(n):
        waiting[v] = pred_ptr[v + 1] - pred_ptr[v]
        if waiting[v] == 0:
            _push(h_key, h_tie, h_op, size, -rank[v], v)
    return (
        placement,
        start,
        finish,
        busy_start,
        busy_end,
        count,
        link_free,
        copy_arrival,
        tentative,
        resident,
        busy,
        group_dev,
        waiting,
        h_key,
        h_tie,
        h_op,
        size,
        scalars,
        est,
        pos,
        eft,
    )


@njit(cache=True, inline="always")
def _push(keys, ties, ops, size, key, op):
    i = size[0]
    size[0] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] < key or (keys[parent] == key and ties[parent] < op):
            break
        keys[i] = keys[parent]
        ties[i] = ties[parent]
        ops[i] = ops[parent]
        i = parent
    keys[i] = key
    ties[i] = op
    ops[i] = op


@njit(cache=True)
def next_op(st):
    """Pop the ready op of highest upward rank (ties: lower index): the op to place next."""
    keys, ties, ops, size = st[13], st[14], st[15], st[16]
    top = ops[0]
    n = size[0] - 1
    size[0] = n
    if n > 0:
        lk, lt, lo = keys[n], ties[n], ops[n]
        i = 0
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and (
                keys[child + 1] < keys[child]
                or (keys[child + 1] == keys[child] and ties[child + 1] < ties[child])
            ):
                child += 1
            if lk < keys[child] or (lk == keys[child] and lt < ties[child]):
                break
            keys[i], ties[i], ops[i] = keys[child], ties[child], ops[child]
            i = child
        keys[i], ties[i], ops[i] = lk, lt, lo
    return top


@njit(cache=True, inline="always")
def _symlog(x):
    return np.log1p(10.0 * x) if x >= 0 else -np.log1p(-10.0 * x)


@njit(cache=True)
def candidates(v, g, st, feat, mask):
    """Fill ``feat`` ``(D, F)`` with the features of placing ``v`` on each device and ``mask``
    ``(D,)`` with the allowed devices (module docstring); the scratch arrays of ``st`` keep each
    device's EST and insertion slot for :func:`commit`. Returns the number of allowed devices."""
    comp, pred_ptr, pred_src, pred_data = g[0], g[3], g[4], g[5]
    latency, bandwidth, params, memory = g[6], g[7], g[8], g[9]
    group, allowed, anchor, has_anchor = g[10], g[12], g[13], g[14]
    rank, w_mean, scale, contention, max_gaps, fastest = g[15], g[16], g[17], g[18], g[19], g[20]
    placement, finish, busy_start, busy_end, count = st[0], st[2], st[3], st[4], st[5]
    link_free, copy_arrival, tentative, resident, busy = st[6], st[7], st[8], st[9], st[10]
    group_dev, scalars, est, pos, eft = st[11], st[17], st[18], st[19], st[20]
    n, num_dev = comp.shape
    preds = (pred_ptr, pred_src, pred_data)
    links = (latency, bandwidth)
    booking = (link_free, copy_arrival, tentative)
    # which devices are allowed
    forced = -1
    if group[v] >= 0 and group_dev[group[v]] >= 0:
        forced = group_dev[group[v]]
    room = False
    for p in range(num_dev):
        if allowed[v, p] and (memory[p] <= 0.0 or resident[p] + params[v] <= memory[p]):
            room = True
    least = -1
    if not room:  # no device has room for its parameters: the least loaded allowed one
        for p in range(num_dev):
            if allowed[v, p] and (least < 0 or resident[p] < resident[least]):
                least = p
    num_allowed = 0
    for p in range(num_dev):
        ok = allowed[v, p]
        if forced >= 0:
            ok = p == forced
        elif least >= 0:
            ok = p == least
        elif memory[p] > 0.0 and resident[p] + params[v] > memory[p]:
            ok = False
        mask[p] = ok
        if ok:
            num_allowed += 1
    if num_allowed == 0:  # the group's device is barred for this op: keep the group
        mask[forced if forced >= 0 else 0] = True
        num_allowed = 1
    # timing on every device
    makespan = scalars[0]
    in_bytes = 0.0
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        in_bytes += pred_data[e]
    best_est, best_eft, best_ready, best_bound = np.inf, np.inf, np.inf, np.inf
    min_dur = np.inf
    min_eft_dev = -1
    mean_busy = 0.0
    tail = rank[v] - w_mean[v]
    ready_at = np.empty(num_dev)
    bound_at = np.empty(num_dev)
    for p in range(num_dev):
        ready = data_ready(v, p, preds, placement, finish, links, contention, booking, False)
        duration = comp[v, p]
        s, j = find_slot(busy_start, busy_end, count, p, ready, duration, max_gaps)
        est[p] = s
        pos[p] = j
        eft[p] = s + duration
        ready_at[p] = ready
        bound_at[p] = max(makespan, eft[p] + tail)
        best_est = min(best_est, s)
        best_ready = min(best_ready, ready)
        best_bound = min(best_bound, bound_at[p])
        min_dur = min(min_dur, duration)
        mean_busy += busy[p] / num_dev
        if mask[p] and (min_eft_dev < 0 or eft[p] < best_eft):
            best_eft = eft[p]
            min_eft_dev = p
    anchor_eft = eft[anchor[v]] if has_anchor else best_eft
    k = 100.0 / scale
    for p in range(num_dev):
        reach, work = 0.0, 0.0
        for q in range(num_dev):
            if q != p:
                reach += busy[q] * min(bandwidth[p, q], fastest)
                work += busy[q]
        near = 0.0
        if work > 0.0 and fastest > 0.0:
            near = np.log2(max(reach / (work * fastest), 2.0**-10))
        moved = 0.0
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_src[e]
            if placement[u] != p and not (contention and copy_arrival[u, p] >= 0.0):
                moved += pred_data[e]
        feat[p, 0] = _symlog((est[p] - best_est) * k)
        feat[p, 1] = _symlog((eft[p] - best_eft) * k) if best_eft < np.inf else 0.0
        feat[p, 2] = _symlog((ready_at[p] - best_ready) * k)
        feat[p, 3] = _symlog((bound_at[p] - best_bound) * k)
        feat[p, 4] = _symlog(max(0.0, eft[p] - makespan) * k)
        feat[p, 5] = _symlog((eft[p] - anchor_eft) * k) if anchor_eft < np.inf else 0.0
        feat[p, 6] = np.log2(comp[v, p] / min_dur) if min_dur > 0 else 0.0
        feat[p, 7] = moved / in_bytes if in_bytes > 0 else 0.0
        if memory[p] > 0.0:
            feat[p, 8] = max(-1.0, (memory[p] - resident[p] - params[v]) / memory[p])
        else:
            feat[p, 8] = 1.0
        feat[p, 9] = _symlog((busy[p] - mean_busy) * k)
        feat[p, 10] = rank[v] / scale
        feat[p, 11] = scalars[2] / n
        feat[p, 12] = 1.0 if p == min_eft_dev else 0.0
        feat[p, 13] = 1.0 if has_anchor and p == anchor[v] else 0.0
        feat[p, 14] = near
    return num_allowed


@njit(cache=True)
def commit(v, p, g, st):
    """Book ``v`` on device ``p`` at the EST that the last :func:`candidates` call of ``v``
    found there; release its successors. Returns the increase of the bound (seconds)."""
    comp, succ_ptr, succ_dst, pred_ptr, pred_src, pred_data = g[0], g[1], g[2], g[3], g[4], g[5]
    latency, bandwidth, params, group = g[6], g[7], g[8], g[10]
    rank, w_mean, contention = g[15], g[16], g[18]
    placement, start, finish, busy_start, busy_end, count = st[0], st[1], st[2], st[3], st[4], st[5]
    link_free, copy_arrival, tentative, resident, busy = st[6], st[7], st[8], st[9], st[10]
    group_dev, waiting, scalars, est, pos = st[11], st[12], st[17], st[18], st[19]
    h_key, h_tie, h_op, size = st[13], st[14], st[15], st[16]
    if contention:
        data_ready(
            v,
            p,
            (pred_ptr, pred_src, pred_data),
            placement,
            finish,
            (latency, bandwidth),
            contention,
            (link_free, copy_arrival, tentative),
            True,
        )
    duration = comp[v, p]
    book_interval(busy_start, busy_end, count, p, pos[p], est[p], est[p] + duration)
    placement[v] = p
    start[v] = est[p]
    finish[v] = est[p] + duration
    resident[p] += params[v]
    busy[p] += duration
    if group[v] >= 0 and group_dev[group[v]] < 0:
        group_dev[group[v]] = p
    old = scalars[1]
    scalars[0] = max(scalars[0], finish[v])
    scalars[1] = max(scalars[1], finish[v] + rank[v] - w_mean[v])
    scalars[2] += 1.0
    for e in range(succ_ptr[v], succ_ptr[v + 1]):
        w = succ_dst[e]
        waiting[w] -= 1
        if waiting[w] == 0:
            _push(h_key, h_tie, h_op, size, -rank[w], w)
    return scalars[1] - old


@njit(cache=True, inline="always")
def head_logits(v, feat, mask, pre, w_feat, b1, w2, b2, anchor_weight, logits):
    """The policy head's logits of ``v`` on each device: ``w2 . relu(pre[v] + feat[p] @ w_feat +
    b1) + b2 + anchor_weight * feat[p, anchor]``, ``-inf`` where ``mask`` is False (``pre`` is
    the op embedding's projection)."""
    num_dev, num_feat = feat.shape
    hidden = b1.shape[0]
    for p in range(num_dev):
        if not mask[p]:
            logits[p] = -np.inf
            continue
        s = b2 + anchor_weight * feat[p, ANCHOR_FEATURE]
        for j in range(hidden):
            a = pre[v, j] + b1[j]
            for f in range(num_feat):
                a += feat[p, f] * w_feat[f, j]
            if a > 0.0:
                s += a * w2[j]
        logits[p] = s


@njit(cache=True, inline="always")
def _argmax(mask, logits):
    """The allowed device of highest logit (ties: the lower device)."""
    p = np.int64(-1)  # not the literal -1 (graphopt.compiled)
    best = -np.inf
    for q in range(mask.shape[0]):
        if mask[q] and (p < 0 or logits[q] > best):
            best = logits[q]
            p = q
    return p


@njit(cache=True)
def run_episode(
    g, mode, pre, w_feat, b1, w2, b2, anchor_weight, uniforms, given, feats, masks, ops, actions
):
    """One episode: every op placed in the scheduler's order, the device picked by ``mode``
    (:data:`MODE_SAMPLE` with ``uniforms`` ``(N,)``, :data:`MODE_GREEDY`, :data:`MODE_ANCHOR`,
    :data:`MODE_GIVEN` from ``given`` ``(N,)``). Step ``k``'s op, features, mask and device are
    written to ``ops[k]``, ``feats[k]`` ``(D, F)``, ``masks[k]`` and ``actions[k]``.

    Returns ``(placement, makespan)``: the decoded placement and the decoder's own step time.
    """
    comp = g[0]
    anchor = g[13]
    n, num_dev = comp.shape
    st = new_state(g)
    logits = np.empty(num_dev)
    for k in range(n):
        v = next_op(st)
        feat = feats[k]
        mask = masks[k]
        candidates(v, g, st, feat, mask)
        p = np.int64(-1)  # not the literal -1 (graphopt.compiled)
        if mode in (MODE_ANCHOR, MODE_GIVEN):
            p = anchor[v] if mode == MODE_ANCHOR else given[v]
            if not mask[p]:  # the reference breaks a mask (e.g. a projected group): keep it
                mask[p] = True
        else:
            head_logits(v, feat, mask, pre, w_feat, b1, w2, b2, anchor_weight, logits)
            if mode == MODE_GREEDY:
                p = _argmax(mask, logits)
            else:
                top = -np.inf
                for q in range(num_dev):
                    if mask[q] and logits[q] > top:
                        top = logits[q]
                total = 0.0
                for q in range(num_dev):
                    logits[q] = np.exp(logits[q] - top) if mask[q] else 0.0
                    total += logits[q]
                target = uniforms[k] * total
                acc = 0.0
                for q in range(num_dev):
                    if mask[q]:
                        acc += logits[q]
                        p = q
                        if acc > target:
                            break
        ops[k] = v
        actions[k] = p
        commit(v, p, g, st)
    return st[0].copy(), st[17][0]


@njit(cache=True, **INTERNAL)
def copy_state(st):
    """An independent copy of a schedule state (:func:`new_state`)."""
    return (
        st[0].copy(),
        st[1].copy(),
        st[2].copy(),
        st[3].copy(),
        st[4].copy(),
        st[5].copy(),
        st[6].copy(),
        st[7].copy(),
        st[8].copy(),
        st[9].copy(),
        st[10].copy(),
        st[11].copy(),
        st[12].copy(),
        st[13].copy(),
        st[14].copy(),
        st[15].copy(),
        st[16].copy(),
        st[17].copy(),
        st[18].copy(),
        st[19].copy(),
        st[20].copy(),
    )


@njit(cache=True, **INTERNAL)
def finish_greedy(g, st, pre, w_feat, b1, w2, b2, anchor_weight):
    """Place every op still unplaced in ``st`` by the head's argmax; returns the makespan."""
    n, num_dev = g[0].shape
    feat = np.zeros((num_dev, NUM_FEATURES), dtype=np.float32)
    mask = np.zeros(num_dev, dtype=np.bool_)
    logits = np.empty(num_dev)
    while st[16][0] > 0:
        v = next_op(st)
        candidates(v, g, st, feat, mask)
        head_logits(v, feat, mask, pre, w_feat, b1, w2, b2, anchor_weight, logits)
        commit(v, _argmax(mask, logits), g, st)
    return st[17][0]


@njit(cache=True)
def branch_makespans(g, pre, w_feat, b1, w2, b2, anchor_weight, actions, steps, out, placements):
    """One-step lookahead (the rollout algorithm's Q-values): replay ``actions`` ``(N,)`` step
    by step and, at each step ``steps[j]`` (increasing), place that step's op on every allowed
    device ``d`` in turn and finish the episode greedily with the head: ``out[j, d]`` is that
    episode's makespan (``inf`` where ``d`` is not allowed) and ``placements[j, d]`` its
    placement (-1 where not allowed)."""
    n, num_dev = g[0].shape
    st = new_state(g)
    feat = np.zeros((num_dev, NUM_FEATURES), dtype=np.float32)
    mask = np.zeros(num_dev, dtype=np.bool_)
    j = 0
    for k in range(n):
        v = next_op(st)
        candidates(v, g, st, feat, mask)
        if j < steps.shape[0] and steps[j] == k:
            for d in range(num_dev):
                if not mask[d]:
                    out[j, d] = np.inf
                    placements[j, d, :] = -1
                    continue
                branch = copy_state(st)
                commit(v, d, g, branch)
                out[j, d] = finish_greedy(g, branch, pre, w_feat, b1, w2, b2, anchor_weight)
                for u in range(n):  # not placements[j, d, :] = branch[0] (graphopt.compiled)
                    placements[j, d, u] = branch[0][u]
            j += 1
        commit(v, actions[k], g, st)
    return st[17][0]


# ---------------------------------------------------------------------------- Python side
@dataclass(frozen=True)
class HeadParams:
    """The policy head's weights as :func:`head_logits` reads them (float64, contiguous).

    Shapes: ``pre`` ``(N, H)`` (the op embeddings' projection, per graph), ``w_feat`` ``(F, H)``,
    ``b1`` ``(H,)``, ``w2`` ``(H,)``; ``b2`` and ``anchor_weight`` floats.
    """

    pre: FloatArray
    w_feat: FloatArray
    b1: FloatArray
    w2: FloatArray
    b2: float
    anchor_weight: float = 0.0

    @staticmethod
    def linear(theta: FloatArray, num_ops: int) -> HeadParams:
        """The head whose logit of device ``d`` is ``theta . feat[v, d]``: a linear scoring rule
        over :data:`SCHEDULE_FEATURES` (the same for every op), written as the MLP
        ``relu(f) - relu(-f)`` with ``2 F`` hidden units.

        Raises:
            ValueError: ``theta`` without one weight per feature.
        """
        theta = np.asarray(theta, dtype=np.float64).reshape(-1)
        if theta.shape != (NUM_FEATURES,):
            raise ValueError(f"theta has {theta.size} weights; the features are {NUM_FEATURES}")
        eye = np.eye(NUM_FEATURES)
        return HeadParams(
            np.zeros((num_ops, 2 * NUM_FEATURES)),
            np.concatenate([eye, -eye], axis=1),
            np.zeros(2 * NUM_FEATURES),
            np.concatenate([theta, -theta]),
            0.0,
        )

    @staticmethod
    def zeros(num_ops: int, hidden: int = 1) -> HeadParams:
        """A head whose logits are 0 everywhere (uniform samples, greedy = lowest allowed device)."""
        return HeadParams(
            np.zeros((num_ops, hidden)),
            np.zeros((NUM_FEATURES, hidden)),
            np.zeros(hidden),
            np.zeros(hidden),
            0.0,
        )


@dataclass(frozen=True)
class Episode:
    """One decoded episode: step ``k`` placed op ``ops[k]`` on ``actions[k]`` seeing
    ``feats[k]`` ``(D, F)`` float32 with ``masks[k]`` ``(D,)`` bool."""

    ops: IntArray
    actions: IntArray
    feats: np.ndarray
    masks: np.ndarray
    placement: IntArray
    makespan: float


MODES = {"sample": MODE_SAMPLE, "greedy": MODE_GREEDY, "anchor": MODE_ANCHOR, "given": MODE_GIVEN}


def decode(
    sg: StepGraph,
    mode: str = "greedy",
    head: HeadParams | None = None,
    *,
    rng: np.random.Generator | None = None,
    given: IntArray | None = None,
) -> Episode:
    """Run one episode of the step-wise decoder (:func:`run_episode`).

    Args:
        sg: the graph, cluster and anchor (:func:`step_graph`).
        mode: ``"sample"`` (the head's softmax, needs ``rng``), ``"greedy"`` (its argmax),
            ``"anchor"`` (the anchor's devices) or ``"given"`` (the devices of ``given``).
        head: the head's weights (None: zeros).
        rng: the random generator of ``"sample"``.
        given: a placement ``(N,)`` for ``"given"``.

    Raises:
        ValueError: an unknown mode, a missing ``rng`` or ``given``, a head of the wrong shape.
    """
    if mode not in MODES:
        raise ValueError(f"unknown decode mode {mode!r}; choose one of: {', '.join(MODES)}")
    n, num_dev = sg.num_ops, sg.num_devices
    head = head or HeadParams.zeros(n)
    if head.pre.shape[0] != n or head.w_feat.shape != (NUM_FEATURES, head.pre.shape[1]):
        raise ValueError(
            f"head has pre {head.pre.shape} and w_feat {head.w_feat.shape}; expected ({n}, H) "
            f"and ({NUM_FEATURES}, H) for {sg.graph.name!r}"
        )
    if mode == "sample" and rng is None:
        raise ValueError("decode mode 'sample' needs rng (a numpy Generator)")
    uniforms = rng.random(n) if mode == "sample" and rng is not None else np.zeros(0)
    if mode == "given":
        if given is None:
            raise ValueError("decode mode 'given' needs the placement to replay (given=...)")
        given_arr = np.ascontiguousarray(given, dtype=np.int64).reshape(-1)
        if given_arr.shape != (n,) or (n and (given_arr.min() < 0 or given_arr.max() >= num_dev)):
            raise ValueError(f"given must be {n} device indices in [0, {num_dev})")
    else:
        given_arr = np.zeros(0, dtype=np.int64)
    feats = np.zeros((n, num_dev, NUM_FEATURES), dtype=np.float32)
    masks = np.zeros((n, num_dev), dtype=np.bool_)
    ops = np.zeros(n, dtype=np.int64)
    actions = np.zeros(n, dtype=np.int64)
    placement, makespan = run_episode(
        sg.arrays,
        MODES[mode],
        np.ascontiguousarray(head.pre, dtype=np.float64),
        np.ascontiguousarray(head.w_feat, dtype=np.float64),
        np.ascontiguousarray(head.b1, dtype=np.float64),
        np.ascontiguousarray(head.w2, dtype=np.float64),
        float(head.b2),
        float(head.anchor_weight),
        uniforms,
        given_arr,
        feats,
        masks,
        ops,
        actions,
    )
    return Episode(ops, actions, feats, masks, placement, float(makespan))


def lookahead(
    sg: StepGraph, head: HeadParams, actions: IntArray, steps: IntArray
) -> tuple[FloatArray, IntArray]:
    """The rollout algorithm's values at chosen steps of an episode (:func:`branch_makespans`).

    Args:
        sg: the graph, cluster and anchor.
        head: the head that finishes each branch greedily.
        actions: the episode's device per step ``(N,)`` (an :class:`Episode`'s ``actions``).
        steps: the steps to branch at, increasing, each in ``[0, N)``.

    Returns:
        ``(makespans, placements)``: ``(len(steps), D)``, the decoder's makespan of placing step
        ``steps[j]``'s op on device ``d`` and finishing greedily (``inf`` where ``d`` is not
        allowed), and ``(len(steps), D, N)`` those placements (-1 where not allowed).
    """
    n = sg.num_ops
    steps_arr = np.ascontiguousarray(steps, dtype=np.int64).reshape(-1)
    if len(steps_arr) and (
        steps_arr.min() < 0 or steps_arr.max() >= n or (np.diff(steps_arr) <= 0).any()
    ):
        raise ValueError(f"steps must be increasing indices in [0, {n})")
    out = np.zeros((len(steps_arr), sg.num_devices), dtype=np.float64)
    placements = np.zeros((len(steps_arr), sg.num_devices, n), dtype=np.int64)
    branch_makespans(
        sg.arrays,
        np.ascontiguousarray(head.pre, dtype=np.float64),
        np.ascontiguousarray(head.w_feat, dtype=np.float64),
        np.ascontiguousarray(head.b1, dtype=np.float64),
        np.ascontiguousarray(head.w2, dtype=np.float64),
        float(head.b2),
        float(head.anchor_weight),
        np.ascontiguousarray(actions, dtype=np.int64),
        steps_arr,
        out,
        placements,
    )
    return out, placements
