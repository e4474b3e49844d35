"""The compiled event loop of the simulator (numba). The rules are in :mod:`graphopt.sim`'s docstring;
the readable twin that must agree with this code exactly is ``tests/graphopt/sim/reference.py``.

Performance notes (why the code looks like this):

- Everything is flat arrays: ``int32`` indices (half the cache footprint of ``int64``; a graph has
  far fewer than 2**31 ops and edges), ``int64`` only for the ready-queue keys, ``float64`` times
  and bytes. The per-op and per-edge arrays are rows of a :class:`Workspace` that the caller
  allocates once per prepared graph and passes to every call (fresh arrays of this size would come
  from ``mmap`` and pay a page fault per 4 KiB on first touch), so a call allocates nothing big.
- The time goes into scattered reads (L2/L3 misses) and unpredictable branches, not arithmetic;
  hence values that are read together are stored together (``op_rec``, ``e_cons``, ``p_slot``,
  ``slot_int``), and per-decision work is done once in :func:`plan_transfers` so that the event
  loop reads sequential per-edge rows instead of chasing ``kernel_of[succ_dst[e]]``.
- Transfers are known before the loop starts: by default one per ``(producer op, remote
  device)`` (other link models: :func:`plan_routes`), numbered by producer, with their link,
  bytes and duration; the counts per link size the link queues.
- Memory is reference-counted per slot (an op's output, a transfer's copy); a consumer kernel that
  reads one producer through several members releases it once, which the pre-pass encodes in
  ``p_slot`` (no per-call marks in the loop). A release is branch-free (``x - 0.0 == x``).
- Without fusion the kernels are the ops themselves (no union-find, no member lists to build).
  With fusion, union by the higher index makes every group's root its highest member.
- Kernel durations read one column per device *class* (devices of one kind and spec), not per
  device: the same values, several times fewer bytes.
- Illegal fusion is detected for free: a cyclic kernel graph deadlocks the event loop, so kernels
  left unfinished when no event remains mean the fusion was illegal.
- Pending events (at most one per device and link) are a short list sorted by decreasing
  ``(end, resource)``: the next one is the last entry, and an insert shifts a few entries. This
  beat a binary heap (a chain of unpredictable swaps) and a tournament tree.
- Link queues are FIFO slices, not heaps: transfers are queued at the current time, which never
  decreases, so ``(queue time, producer, transfer)`` order (the rules' ``(queue time, producer,
  consumer)``: one producer's transfers on one link are numbered by consumer) only needs a
  sorted insert among the entries queued at the same instant. An entry carries its transfer's
  duration, so starting it reads the queue sequentially.
- The cluster's model options (:class:`GraphArrays` ``contention``, ``host``, ``per_consumer``,
  ``charge_copies``, ``fcfs``) are scalars that the loop branches on; with the defaults every such branch
  goes the same way every time, so the predictor makes them free, and the default plan is
  :func:`plan_transfers` itself. Other link models plan with :func:`plan_routes`, which records
  per transfer what the default plan leaves implicit (the edge it satisfies, the hop before it,
  the hops after it), and numbers the second hops through the host after every other transfer,
  so that the loop queues a producer's transfers with the same code in every model. What only
  other models do (start every queued transfer of a link at once, a transfer's arrival) lives
  in functions the loop calls, not inlined: measured on ``bench/bench_sim.py``'s decisions,
  their code inside the loop, or even the resource marking written as an inlined call, slowed
  the default model by 5-15%. Without contention a transfer is its own resource
  (``num_r + transfer``) in the pending events, which then hold up to one entry per transfer
  besides the devices.
- Dispatch only visits resources marked dirty (freed, or given new work) since the last dispatch,
  instead of scanning all ``D + D*(D-1)`` devices and links after every event.
- Device ready queues are binary heaps of ``(priority << 32) | kernel`` keys, one slice per
  device of one array (:mod:`graphopt.sim.heaps`), sized by the device's kernel count. Under
  ``dispatch: fcfs`` (:class:`GraphArrays` ``fcfs``) the key is ``(instant << 32) | kernel``,
  ``instant`` the number of distinct event times before the one at which the kernel became
  ready: time never decreases, so this orders like ``(ready time, root index)`` with the same
  heaps. Every push adds ``stamp``, that instant shifted, to a per-kernel key of ``kernel``
  alone; under ``priority`` the stamp stays 0 and the key is the priority's, so the default
  pays one predictable branch per event time.
- Hot helpers are inlined, and ``max`` of floats is written as a select (numba's builtin ``max``
  compiled to a call in the event loop).
- The graph's and the workspace's arrays travel as two named tuples (:class:`GraphArrays`,
  :class:`Workspace`, defined with :class:`CoreResult` in :mod:`graphopt.sim.arrays`) instead of
  27 arguments; numba compiles them to structs, so reading a field costs what reading an argument
  did. Only the border with Python uses plain tuples (:func:`simulate_core` says why).
- Compile time (numba's, on a cold cache) follows :mod:`graphopt.compiled`: one signature per
  function (the decision arrays are always writable: :func:`~graphopt.sim.simulator._check_array`
  copies a read-only one), no literal passed to a compiled callee (``num_ev`` starts as
  ``np.int64(0)``), no array assigned to a slice (``simulate_batch`` copies element by element),
  and the functions only the engine calls (:func:`_simulate`, the plans, :func:`_start_all`,
  :func:`_arrive`) have no Python wrapper.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.compiled import INTERNAL
from graphopt.sim.arrays import CoreResult, GraphArrays, Workspace
from graphopt.sim.heaps import iheap_pop, iheap_push
from graphopt.sim.links import first_hop, transfer_time

STATUS_OK = 0
STATUS_OOM = 1
STATUS_ILLEGAL_FUSION = 2


@njit(cache=True, inline="always", error_model="numpy")
def _find(parent, i):
    root = i
    while parent[root] != root:
        root = parent[root]
    while parent[i] != root:  # path compression
        nxt = parent[i]
        parent[i] = root
        i = nxt
    return root


@njit(cache=True, error_model="numpy")
def build_kernels(succ_ptr, succ_dst, fusion, op_int):
    """Group ops into kernels, writing into rows 0-5 of ``op_int`` (an ``int32`` array with at
    least 6 rows of length ``N + 1``).

    Returns views ``(kernel_of[N], root[K], member_ptr[K+1], members[N])``. An op with fusion bit 1
    is merged with all of its consumers (union-find); kernels are numbered by their root, the member
    with the highest topological index; members are listed ascending.
    """
    n = len(fusion)
    kernel_of = op_int[0, :n]
    roots = op_int[1, :n]
    ptr = op_int[2, : n + 1]
    members = op_int[3, :n]
    any_fusion = False
    for u in range(n):
        if fusion[u] != 0 and succ_ptr[u + 1] > succ_ptr[u]:
            any_fusion = True
            break
    if not any_fusion:
        for i in range(n):
            kernel_of[i] = i
            roots[i] = i
            members[i] = i
            ptr[i] = i
        ptr[n] = n
        return kernel_of, roots, ptr, members
    parent = op_int[4, :n]
    kid = op_int[5, :n]
    for i in range(n):
        parent[i] = i
    for u in range(n):
        if fusion[u] != 0:
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                a = _find(parent, u)
                b = _find(parent, succ_dst[e])
                if a != b:  # the higher index becomes the root: roots are the groups' maxima
                    if a < b:
                        parent[a] = b
                    else:
                        parent[b] = a
    # parents only point to higher indices: downwards, each op can take its parent's root
    for i in range(n - 1, -1, -1):
        parent[i] = parent[parent[i]]
    k = 0
    for i in range(n):  # number the roots in ascending order (branch-free)
        kid[i] = k
        roots[k] = i  # kept only if i is a root: the next root overwrites it
        k += parent[i] == i
    for i in range(k + 1):
        ptr[i] = 0
    for i in range(n):
        g = kid[parent[i]]
        kernel_of[i] = g
        ptr[g + 1] += 1
    for i in range(k):
        ptr[i + 1] += ptr[i]
    fill = parent  # reuse: the union-find forest is no longer needed
    for i in range(k):
        fill[i] = ptr[i]
    for i in range(n):
        g = kernel_of[i]
        members[fill[g]] = i
        fill[g] += 1
    return kernel_of, roots[:k], ptr[: k + 1], members


@njit(cache=True, inline="always", error_model="numpy")
def _max(a, b):
    """Python's ``max(a, b)`` as a plain select (numba's builtin is a call in some contexts)."""
    return b if b > a else a


@njit(cache=True, error_model="numpy")
def kernel_durations(g, roots, member_ptr, members, k_dev, e_cons, dur):
    """Duration of every kernel on its device (rules 3-4 of :mod:`graphopt.sim`), into ``dur``.

    ``g`` is a :class:`GraphArrays` (op times per device class: see ``dev_class`` there), and
    ``e_cons[e, 0]`` the kernel of the consumer of out-edge ``e`` (successor order; the rows of
    :func:`plan_transfers`' ``e_cons``, whole: a column of it would be a strided array from
    here but a contiguous one from Python when there is one edge, another compiled signature).
    """
    num_k = len(roots)
    for k in range(num_k):
        d = k_dev[k]
        c = g.dev_class[d]
        lo = member_ptr[k]
        hi = member_ptr[k + 1]
        if hi - lo == 1:
            dur[k] = g.op_time[members[lo], c]
            continue
        smeas = 0.0
        mmax = 0.0
        all_meas = True
        for m in range(lo, hi):
            t = g.op_meas[members[m], c]
            if np.isnan(t):
                all_meas = False
                break
            smeas += t
            mmax = _max(mmax, t)
        if all_meas:
            dur[k] = _max(smeas - (hi - lo - 1) * g.launch[d], mmax)
            continue
        # Roofline over the group: every member's FLOPs and bytes at its own efficiency, less
        # the bytes that no longer cross the kernel's border (a read at its reader's, a write at
        # its writer's efficiency).
        sf = 0.0
        sb = 0.0
        for m in range(lo, hi):
            u = members[m]
            sf += g.flops[u] * g.op_cinv[u, c]
            sb += g.nbytes[u] * g.op_binv[u, c]
        for m in range(lo, hi):
            u = members[m]
            has_cons = False
            inner = True
            for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
                has_cons = True
                if e_cons[e, 0] == k:
                    sb -= g.edge_bytes[e] * g.op_binv[g.succ_dst[e], c]
                else:
                    inner = False
            if has_cons and inner:
                sb -= g.out_bytes[u] * g.op_binv[u, c]
        sb = _max(sb, 0.0)
        dur[k] = _max(sf, sb) + g.launch[d]
    return dur[:num_k]


@njit(cache=True, inline="always", error_model="numpy")
def link_index(s, t, num_dev):
    """Index of the directed link ``s -> t`` (``s != t``) among the ``D * (D - 1)`` links, ordered
    by ``(s, t)``."""
    return s * (num_dev - 1) + t - (1 if t > s else 0)


@njit(cache=True, inline="always", error_model="numpy")
def _edge_plan_rows(ws, num_k):
    """Views of :func:`plan_transfers`' per-kernel and per-edge rows of ``ws``: ``need[K]``,
    ``e_cons`` and ``p_slot``."""
    return ws.op_int[5, :num_k], ws.edge_pair[0], ws.edge_pair[1]


@njit(cache=True, inline="always", error_model="numpy")
def _transfer_rows(ws, num_t):
    """Views of the first ``num_t`` transfers' rows of ``ws``: ``(t_op, t_src, t_dst, t_link,
    t_bytes, t_dur)``."""
    ei = ws.edge_int
    ef = ws.edge_float
    return ei[0, :num_t], ei[1, :num_t], ei[2, :num_t], ei[3, :num_t], ef[0, :num_t], ef[1, :num_t]


@njit(cache=True, inline="always", error_model="numpy")
def _route_rows(ws, num_t):
    """Views of the rows :func:`plan_routes` adds per transfer: ``(t_parent, t_edge, t_clo,
    t_chi)``."""
    ei = ws.edge_int
    return ei[6, :num_t], ei[7, :num_t], ei[8, :num_t], ei[9, :num_t]


@njit(cache=True, inline="always", error_model="numpy")
def _plan_edge(g, e, u, k, oslot, kernel_of, k_dev, need, e_cons, p_slot, kmark):
    """Plan out-edge ``e`` of op ``u`` (kernel ``k``, output in memory slot ``oslot``) for both
    plans: its consumer kernel and device in ``e_cons``, one more input of that kernel in
    ``need``, and in ``p_slot`` the release of ``u``'s output once per consumer kernel, at its
    first edge from ``u`` (``kmark[h] == u``: ``h`` already reads ``u`` through a lower member).
    The transfer's slot (``p_slot[p, 1]``) is left -1 for the plan to fill.

    Returns ``(p, t, new_consumer)``: the edge's predecessor slot, the consumer's device (-1 for
    an edge inside ``u``'s kernel, which needs nothing more) and whether the consumer kernel reads
    ``u`` for the first time."""
    h = kernel_of[g.succ_dst[e]]
    e_cons[e, 0] = h
    p = g.succ_to_pred[e]
    p_slot[p, 1] = -1
    if h == k:
        e_cons[e, 1] = -1
        p_slot[p, 0] = -1
        return p, -1, False
    need[h] += 1
    t = k_dev[h]
    e_cons[e, 1] = t
    new_consumer = kmark[h] != u
    if new_consumer:
        kmark[h] = u
    p_slot[p, 0] = oslot if new_consumer else -1
    return p, t, new_consumer


@njit(cache=True, inline="always", error_model="numpy")
def _plan_op(g, u, s, first, oslot, ext, op_rec, slot_int, slot_float):
    """Record op ``u`` (on device ``s``, transfers from ``first``, ``ext`` consumer kernels
    outside its own) in ``op_rec`` and its output's memory slot ``oslot``."""
    op_rec[u, 0] = g.pred_ptr[u]
    op_rec[u, 1] = g.succ_ptr[u]
    op_rec[u, 2] = first
    op_rec[u, 3] = g.succ_ptr[u + 1] == g.succ_ptr[u] or ext > 0
    slot_int[oslot, 0] = ext
    slot_int[oslot, 1] = s
    slot_float[oslot] = g.out_bytes[u]


@njit(cache=True, inline="always", error_model="numpy")
def _close_plan(g, n, num_sent, num_t, op_rec, t_src, t_dst, t_link, t_bytes, t_dur):
    """End both plans: the sentinel row ``op_rec[n]`` (``num_sent`` transfers are sent as their
    producer's kernel ends), and each of the ``num_t`` transfers' duration and link. Returns
    ``link_count[D*(D-1)]``, the transfers per link."""
    num_dev = g.link_bw.shape[0]
    op_rec[n, 0] = g.pred_ptr[n]
    op_rec[n, 1] = g.succ_ptr[n]
    op_rec[n, 2] = num_sent
    link_count = np.zeros(num_dev * (num_dev - 1), dtype=np.int64)
    for i in range(num_t):
        s = t_src[i]
        t = t_dst[i]
        # int64 devices, as the other callers of transfer_time pass (one compiled signature)
        t_dur[i] = transfer_time(g.link_lat, g.link_bw, np.int64(s), np.int64(t), t_bytes[i])
        t_link[i] = link_index(s, t, num_dev)
        link_count[t_link[i]] += 1
    return link_count


@njit(cache=True, error_model="numpy", **INTERNAL)
def plan_transfers(g, kernel_of, k_dev, ws):
    """The per-decision pre-pass over every out-edge (rules 5 and 8 of :mod:`graphopt.sim`) of
    :class:`GraphArrays` ``g``, given every op's kernel and every kernel's device.

    Everything that depends on the decision but not on time is worked out here, once, so that the
    event loop reads short sequential rows instead of chasing ``kernel_of[succ_dst[e]]`` and
    ``k_dev[...]`` per event. Fills, for ``N`` ops, ``K`` kernels and ``E`` edges (rows of
    :class:`Workspace` ``ws``):

    - per kernel: ``need[K]``, its input edges from other kernels;
    - per op, ``op_rec[u] = (pred_ptr[u], succ_ptr[u], t_first[u], stored)``, ``N + 1`` rows: its
      in-edges, out-edges and transfers ``t_first[u]:t_first[u+1]``, and 1 if its output is
      stored (it has no consumer, or one outside its kernel);
    - per transfer ``i`` (numbered by producer, then by first consumer edge): producer ``t_op``,
      source ``t_src`` and destination ``t_dst`` devices, ``t_link`` (:func:`link_index`),
      ``t_bytes`` (the largest edge) and ``t_dur = latency + bytes / bandwidth``;
    - per out-edge ``e`` (successor order): ``e_cons[e] = (kernel, device)`` of the consumer, with
      device -1 when the edge stays inside one kernel (the loop reads these sequentially instead
      of chasing ``kernel_of[succ_dst[e]]`` and ``k_dev[...]``);
    - memory slots, one per op output and one per transfer (the copy it leaves on its destination),
      each ``(count, device)`` in ``slot_int`` and ``bytes`` in ``slot_float``: the count is the
      number of distinct consumer kernels whose end releases the memory (outside the op's kernel;
      on the destination for a copy), the device is where the memory lives. Op ``u``'s slot is
      ``u + t_first[u]``, followed by the slots of its transfers: transfer ``i`` of producer
      ``u`` has slot ``u + 1 + i``. Neighbours in memory, as they are released together;
    - per in-edge ``p`` (predecessor order, found through ``succ_to_pred``):
      ``p_slot[p] = (output slot, copy slot)``: the producer's output slot and the slot of the
      transfer that carries the edge (-1 when producer and consumer kernels share a device).
      Both are -1 when the edge stays inside one kernel, and for the second and later edges from
      one producer into one kernel: a kernel releases each input once.

    Returns ``(num_transfers, link_count[D*(D-1)])``.
    """
    n = len(kernel_of)
    num_k = len(k_dev)
    num_e = len(g.succ_dst)
    num_dev = g.link_bw.shape[0]
    need, e_cons, p_slot = _edge_plan_rows(ws, num_k)
    kmark = ws.op_int[6, :num_k]  # kmark[h] == u: h already reads u
    t_op, t_src, t_dst, t_link, t_bytes, t_dur = _transfer_rows(ws, num_e)
    op_rec, slot_int, slot_float = ws.op_rec, ws.slot_int, ws.slot_float
    need[:] = 0
    kmark[:] = -1
    dmark = np.full(num_dev, -1, dtype=np.int64)  # dmark[t] == u: u already sends to t
    dtid = np.zeros(num_dev, dtype=np.int64)  # ... with transfer dtid[t]
    num_t = 0
    for u in range(n):
        k = kernel_of[u]
        s = k_dev[k]
        first = num_t  # u's first transfer
        oslot = u + first
        ext = 0
        for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
            p, t, new_consumer = _plan_edge(
                g, e, u, k, oslot, kernel_of, k_dev, need, e_cons, p_slot, kmark
            )
            ext += new_consumer
            if t == s or t < 0:
                continue
            if dmark[t] != u:  # a new transfer (the rest of its fields: below)
                dmark[t] = u
                dtid[t] = num_t
                t_dst[num_t] = t
                t_bytes[num_t] = g.edge_bytes[e]
                slot_int[u + 1 + num_t, 0] = 0
                num_t += 1
            elif g.edge_bytes[e] > t_bytes[dtid[t]]:
                t_bytes[dtid[t]] = g.edge_bytes[e]
            if new_consumer:
                tslot = u + 1 + dtid[t]
                p_slot[p, 1] = tslot
                slot_int[tslot, 0] += 1
        _plan_op(g, u, s, first, oslot, ext, op_rec, slot_int, slot_float)
        for i in range(first, num_t):
            t_op[i] = u
            t_src[i] = s
            slot_int[u + 1 + i, 1] = t_dst[i]
            slot_float[u + 1 + i] = t_bytes[i]
    link_count = _close_plan(g, n, num_t, num_t, op_rec, t_src, t_dst, t_link, t_bytes, t_dur)
    return num_t, link_count


@njit(cache=True, error_model="numpy", **INTERNAL)
def plan_routes(g, kernel_of, k_dev, ws):
    """:func:`plan_transfers` for the link models it does not cover: ``send: per-consumer`` or
    ``route: via-host`` (``g.per_consumer``, ``g.host >= 0``; rules 5 and 8 of
    :mod:`graphopt.sim`; which sends the host relays: :func:`graphopt.sim.links.first_hop`).
    Fills the same rows, with the same meaning, plus per transfer ``i``:

    - ``t_parent[i]``: the first hop it follows (through the host), -1 for a transfer sent as
      its producer's kernel ends;
    - ``t_edge[i]``: what its arrival satisfies: -1 every edge from its producer into its
      destination (a send per device), ``e`` the edge ``e`` alone (a send per consumer), -2
      nothing (a first hop that only relays);
    - ``t_clo[i]:t_chi[i]``: the second hops that follow it (queued when it arrives).

    The ``R`` transfers sent when their producer's kernel ends come first, numbered by producer
    and then by consumer edge, so that ``op_rec[u, 2]:op_rec[u + 1, 2]`` are ``u``'s as in
    :func:`plan_transfers` and the event loop queues them with the same code; the second hops
    follow, numbered ``R`` on in the same order, with memory slot ``N + i`` (a first pass counts
    ``R``). Under ``per-device`` a producer's first hop is its one transfer to the host, shared
    by the host's consumer kernels and every relayed device; its copy on the host is counted once
    per host consumer kernel and once per second hop (each releases it at its end). Under
    ``per-consumer`` every remote edge has its own send (one transfer, or a first hop and a
    second), each copy counted once.

    Returns ``(num_transfers, link_count[D*(D-1)])``.
    """
    n = len(kernel_of)
    num_k = len(k_dev)
    num_t_max = ws.edge_int.shape[1] - 1
    num_dev = g.link_bw.shape[0]
    host = g.host
    per_consumer = g.per_consumer
    need, e_cons, p_slot = _edge_plan_rows(ws, num_k)
    kmark = ws.op_int[6, :num_k]
    t_op, t_src, t_dst, t_link, t_bytes, t_dur = _transfer_rows(ws, num_t_max)
    t_parent, t_edge, t_clo, t_chi = _route_rows(ws, num_t_max)
    op_rec, slot_int, slot_float = ws.op_rec, ws.slot_int, ws.slot_float
    dmark = np.full(num_dev, -1, dtype=np.int64)  # dmark[t] == u: u already sends to t
    dtid = np.zeros(num_dev, dtype=np.int64)  # ... with transfer dtid[t]
    # first pass: R, the transfers sent when their producer's kernel ends
    num_roots = 0
    for u in range(n):
        k = kernel_of[u]
        s = k_dev[k]
        for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
            h = kernel_of[g.succ_dst[e]]
            t = k_dev[h]
            if h == k or t == s:
                continue
            if not per_consumer:
                t = first_hop(host, s, t)  # relayed or to the host: u's one transfer there
                if dmark[t] == u:
                    continue
                dmark[t] = u
            num_roots += 1
    need[:] = 0
    kmark[:] = -1
    dmark[:] = -1
    num_t = 0  # the next transfer sent at its producer's end
    num_c = num_roots  # the next second hop
    for u in range(n):
        k = kernel_of[u]
        s = k_dev[k]
        first = num_t
        first_c = num_c
        oslot = u + first
        ext = 0
        for e in range(g.succ_ptr[u], g.succ_ptr[u + 1]):
            p, t, new_consumer = _plan_edge(
                g, e, u, k, oslot, kernel_of, k_dev, need, e_cons, p_slot, kmark
            )
            ext += new_consumer
            if t == s or t < 0:
                continue
            hop = first_hop(host, s, t)
            relay = hop != t
            nbytes = g.edge_bytes[e]
            # the transfer sent at u's end: to t, or the first hop to the host
            if per_consumer or dmark[hop] != u:
                i = num_t
                num_t += 1
                t_src[i] = s
                t_dst[i] = hop
                t_bytes[i] = nbytes
                t_parent[i] = -1
                t_edge[i] = (-2 if relay else e) if per_consumer else -1
                t_clo[i] = 0
                t_chi[i] = 0
                slot_int[u + 1 + i, 0] = 0
                if not per_consumer:
                    dmark[t_dst[i]] = u
                    dtid[t_dst[i]] = i
            else:
                i = dtid[hop]
                t_bytes[i] = _max(t_bytes[i], nbytes)
            slot = u + 1 + i
            if relay:  # the second hop, host -> t
                root = i
                if per_consumer or dmark[t] != u:
                    i = num_c
                    num_c += 1
                    t_src[i] = hop
                    t_dst[i] = t
                    t_bytes[i] = nbytes
                    t_parent[i] = root
                    t_edge[i] = e if per_consumer else -1
                    t_clo[i] = 0
                    t_chi[i] = 0
                    slot_int[n + i, 0] = 0
                    slot_int[u + 1 + root, 0] += 1  # released when the second hop arrives
                    if per_consumer:
                        t_clo[root] = i
                        t_chi[root] = i + 1
                    else:
                        dmark[t] = u
                        dtid[t] = i
                        t_clo[root] = first_c  # every second hop of u follows it
                else:
                    i = dtid[t]
                    t_bytes[i] = _max(t_bytes[i], nbytes)
                slot = n + i
            if per_consumer or new_consumer:  # released when the consumer kernel ends
                p_slot[p, 1] = slot
                slot_int[slot, 0] += 1
        if not per_consumer and num_c > first_c:
            t_chi[first] = num_c
        _plan_op(g, u, s, first, oslot, ext, op_rec, slot_int, slot_float)
        for i in range(first, num_t):
            t_op[i] = u
        for i in range(first_c, num_c):
            t_op[i] = u
    for i in range(num_c):
        slot = t_op[i] + 1 + i if i < num_roots else n + i
        slot_int[slot, 1] = t_dst[i]
        slot_float[slot] = t_bytes[i] if g.charge_copies else 0.0
    link_count = _close_plan(g, n, num_t, num_c, op_rec, t_src, t_dst, t_link, t_bytes, t_dur)
    return num_c, link_count


@njit(cache=True, inline="always", error_model="numpy")
def _release(slot_int, slot_float, slot, cur):
    """One consumer kernel of memory slot ``slot`` has finished: free the slot after the last."""
    left = slot_int[slot, 0] - 1
    slot_int[slot, 0] = left
    # branch-free (x - 0.0 == x exactly): whether this was the last consumer is unpredictable
    cur[slot_int[slot, 1]] -= slot_float[slot] if left == 0 else 0.0


@njit(cache=True, inline="always", error_model="numpy")
def _insert_event(ev_time, ev_res, num_ev, time, res):
    """Insert ``(time, res)`` into the first ``num_ev`` events, sorted by decreasing
    ``(time, resource)`` so that the next event is the last; returns the new count. There are few
    events (at most one per device and link), and a new one usually lands near the end."""
    i = num_ev
    while i > 0 and (ev_time[i - 1] < time or (ev_time[i - 1] == time and ev_res[i - 1] < res)):
        ev_time[i] = ev_time[i - 1]
        ev_res[i] = ev_res[i - 1]
        i -= 1
    ev_time[i] = time
    ev_res[i] = res
    return num_ev + 1


@njit(cache=True, error_model="numpy")
def simulate_core(graph, placement, priority, fusion, workspace):
    """Simulate one decision (:mod:`graphopt.sim` has the rules): ``placement``, ``priority`` and
    ``fusion`` are ``[N]`` integer arrays; ``graph`` and ``workspace`` are a :class:`GraphArrays`
    and a :class:`Workspace` for the graph.

    Returns the fields of a :class:`CoreResult`, in its order; its per-op, per-kernel and
    per-transfer arrays are views into the workspace, valid until its next use.

    Plain tuples cross the border with Python, in and out (``tuple(g)``, ``result[:]``): numba
    types a plain tuple of arrays in C but a named tuple in Python, and boxes a named tuple with a
    Python call, each a microsecond or so per call. Inside, the named tuples cost nothing.
    """
    return _simulate(GraphArrays(*graph), placement, priority, fusion, Workspace(*workspace))[:]


@njit(cache=True, inline="always", error_model="numpy")
def _mark(dirty, in_dirty, num_dirty, r):
    """Add resource ``r`` to the ``num_dirty`` resources to visit at the next dispatch; returns
    the new count."""
    if not in_dirty[r]:
        in_dirty[r] = True
        dirty[num_dirty] = r
        num_dirty += 1
    return num_dirty


@njit(cache=True, inline="always", error_model="numpy")
def enqueue_transfer(lq, l_head, l_tail, j, now, u, tid, dur, nbytes):
    """Queue transfer ``tid`` (producer ``u``) on link ``j`` at ``now``. Queue order is
    ``(queue time, producer, transfer)``: a producer's transfers on one link are numbered by
    consumer (:func:`plan_routes`). Times only grow, so this is a FIFO in which entries queued
    at the same instant are kept sorted: insert from the tail (nearly always at the tail
    itself). ``lq`` holds the queue rows ``(l_time, l_tie, l_tid, l_dur, l_bytes)``."""
    l_time, l_tie, l_tid, l_dur, l_bytes = lq
    i = l_tail[j]
    l_tail[j] += 1
    while (
        i > l_head[j]
        and l_time[i - 1] == now
        and (l_tie[i - 1] > u or (l_tie[i - 1] == u and l_tid[i - 1] > tid))
    ):
        l_time[i] = l_time[i - 1]
        l_tie[i] = l_tie[i - 1]
        l_tid[i] = l_tid[i - 1]
        l_dur[i] = l_dur[i - 1]
        l_bytes[i] = l_bytes[i - 1]
        i -= 1
    l_time[i] = now
    l_tie[i] = u
    l_tid[i] = tid
    l_dur[i] = dur
    l_bytes[i] = nbytes


@njit(cache=True, error_model="numpy", **INTERNAL)
def _start_all(
    lq, l_head, l_tail, j, d, now, t_start, t_end, charge, cur, peak_act, ev_time, ev_res,
    num_ev, num_r,
):  # fmt: skip
    """Without contention: start every transfer queued on link ``j`` (to device ``d``) at
    ``now``, each an event of its own (resource ``num_r + transfer``). Returns the new event
    count and the bytes sent. Not inlined: the default model never calls it, and keeping it out
    of the event loop keeps that loop small."""
    l_time, l_tie, l_tid, l_dur, l_bytes = lq
    sent = 0.0
    while l_head[j] < l_tail[j]:
        i = l_head[j]
        l_head[j] += 1
        k = l_tid[i]
        t_start[k] = now
        t_end[k] = now + l_dur[i]
        if charge:
            cur[d] += l_bytes[i]
            if cur[d] > peak_act[d]:
                peak_act[d] = cur[d]
        sent += l_bytes[i]
        num_ev = _insert_event(ev_time, ev_res, num_ev, t_end[k], num_r + k)
    return num_ev, sent


@njit(cache=True, error_model="numpy", **INTERNAL)
def _arrive(
    k, now, num_dev, routed, t_op, t_dst, t_edge, t_parent, t_clo, t_chi, t_link, t_dur, t_bytes,
    op_rec, e_cons, need, k_key, stamp, ready, dev_base, dev_size, slot_int, slot_float, cur, lq,
    l_head, l_tail, dirty, in_dirty, num_dirty,
):  # fmt: skip
    """Transfer ``k`` arrives, under any link model but the default (whose arrival the event
    loop handles itself): it satisfies the edges its ``t_edge`` names (a kernel made ready is
    pushed with key ``k_key + stamp``, as in the loop), releases its first hop's copy on the
    host, and queues the hops after it. Returns the new count of dirty resources.
    Not inlined, like :func:`_start_all`."""
    u = t_op[k]
    d = t_dst[k]
    te = t_edge[k] if routed else -1
    if te == -1:  # a send to the device: every edge from u into it
        for e in range(op_rec[u, 1], op_rec[u + 1, 1]):
            if e_cons[e, 1] == d:
                h = e_cons[e, 0]
                need[h] -= 1
                if need[h] == 0:
                    iheap_push(ready, dev_base, dev_size, d, k_key[h] + stamp)
                    num_dirty = _mark(dirty, in_dirty, num_dirty, d)
    elif te >= 0:  # a send to one consumer: its edge alone
        h = e_cons[te, 0]
        need[h] -= 1
        if need[h] == 0:
            iheap_push(ready, dev_base, dev_size, d, k_key[h] + stamp)
            num_dirty = _mark(dirty, in_dirty, num_dirty, d)
    if routed:
        if t_parent[k] >= 0:  # the copy relayed by the host has done its part
            _release(slot_int, slot_float, u + 1 + t_parent[k], cur)
        for c in range(t_clo[k], t_chi[k]):  # the hops after this one
            j = t_link[c]
            enqueue_transfer(lq, l_head, l_tail, j, now, u, c, t_dur[c], t_bytes[c])
            num_dirty = _mark(dirty, in_dirty, num_dirty, num_dev + j)
    return num_dirty


@njit(cache=True, error_model="numpy", **INTERNAL)
def _simulate(g, placement, priority, fusion, ws):
    """:func:`simulate_core` on the named tuples."""
    n = len(g.flops)
    num_dev = len(g.peak)
    contention = g.contention
    routed = g.host >= 0 or g.per_consumer  # planned by plan_routes, not plan_transfers
    plain = contention and not routed  # the default link model
    charge = g.charge_copies
    fcfs = g.fcfs
    op_rec, slot_int, slot_float = ws.op_rec, ws.slot_int, ws.slot_float
    kernel_of, roots, member_ptr, members = build_kernels(g.succ_ptr, g.succ_dst, fusion, ws.op_int)
    num_k = len(roots)
    k_dev = ws.op_int[4, :num_k]
    k_key = ws.op_key[0, :num_k]
    dev_count = np.zeros(num_dev, dtype=np.int64)
    for k in range(num_k):
        r = roots[k]
        k_dev[k] = placement[r]
        # kernels are numbered by root: k orders like r; fcfs: the ready instant is added on push
        k_key[k] = k if fcfs else (priority[r] << 32) | k
        dev_count[k_dev[k]] += 1
    if routed:
        num_t, link_count = plan_routes(g, kernel_of, k_dev, ws)
    else:
        num_t, link_count = plan_transfers(g, kernel_of, k_dev, ws)
    need, e_cons, p_slot = _edge_plan_rows(ws, num_k)
    t_op, t_src, t_dst, t_link, t_bytes, t_dur = _transfer_rows(ws, num_t)
    t_parent, t_edge, t_clo, t_chi = _route_rows(ws, num_t)
    if not charge and not routed:  # copies use no memory (plan_routes does this itself)
        for i in range(num_t):
            slot_float[t_op[i] + 1 + i] = 0.0
    dur = kernel_durations(g, roots, member_ptr, members, k_dev, e_cons, ws.op_float[0])

    # ---- queues --------------------------------------------------------------------------------
    ready = ws.op_key[1, :num_k]
    dev_base = np.zeros(num_dev, dtype=np.int64)
    for d in range(1, num_dev):
        dev_base[d] = dev_base[d - 1] + dev_count[d - 1]
    dev_size = np.zeros(num_dev, dtype=np.int64)
    num_l = num_dev * (num_dev - 1)
    # link queue entries: queue time, producer, transfer, and the transfer's duration and bytes
    # (copied in when queued, so that starting a transfer reads the queue sequentially)
    l_time = ws.edge_float[2]
    l_tie = ws.edge_int[4]
    l_tid = ws.edge_int[5]
    l_dur = ws.edge_float[3]
    l_bytes = ws.edge_float[4]
    lq = (l_time, l_tie, l_tid, l_dur, l_bytes)
    link_dst = np.empty(num_l, dtype=np.int64)
    for s in range(num_dev):
        for t in range(num_dev):
            if s != t:
                link_dst[link_index(s, t, num_dev)] = t
    l_base = np.zeros(num_l + 1, dtype=np.int64)
    for j in range(num_l):
        l_base[j + 1] = l_base[j] + link_count[j]
    l_head = l_base.copy()  # link queues: FIFO slices [l_head[j], l_tail[j]) of the l_* rows
    l_tail = l_base.copy()
    num_r = num_dev + num_l  # resources: devices, then links in link_index order
    # events: the running jobs' (end, resource), at most one per resource, sorted decreasingly;
    # without contention every transfer is a resource of its own, num_r + transfer
    num_slots = num_r if contention else num_r + num_t
    ev_time = np.empty(num_slots, dtype=np.float64)
    ev_res = np.empty(num_slots, dtype=np.int64)
    num_ev = np.int64(0)  # not the literal 0 (graphopt.compiled)
    busy_res = np.zeros(num_r, dtype=np.bool_)
    job = np.empty(num_r, dtype=np.int64)  # running kernel or transfer
    job_op = np.empty(num_r, dtype=np.int64)  # a running transfer's producer
    dirty = np.empty(num_r, dtype=np.int64)
    in_dirty = np.zeros(num_r, dtype=np.bool_)
    num_dirty = 0

    cur = np.zeros(num_dev, dtype=np.float64)
    peak_act = np.zeros(num_dev, dtype=np.float64)
    busy = np.zeros(num_dev, dtype=np.float64)
    # what a kernel of one op allocates when it starts (+0.0 leaves `cur` unchanged); NaN if fused
    k_alloc = ws.op_float[3, :num_k]
    for k in range(num_k):
        u = roots[k]
        if member_ptr[k + 1] - member_ptr[k] > 1:
            k_alloc[k] = np.nan
        else:
            k_alloc[k] = g.out_bytes[u] if op_rec[u, 3] else 0.0
    k_start = ws.op_float[1, :num_k]
    k_end = ws.op_float[2, :num_k]
    t_start = ws.edge_float[5, :num_t]
    t_end = ws.edge_float[6, :num_t]
    k_start[:] = np.nan
    k_end[:] = np.nan
    t_start[:] = np.nan
    t_end[:] = np.nan
    moved = 0.0

    for k in range(num_k):
        if need[k] == 0:
            d = k_dev[k]
            iheap_push(ready, dev_base, dev_size, d, k_key[k])
            if not in_dirty[d]:
                in_dirty[d] = True
                dirty[num_dirty] = d
                num_dirty += 1

    # ---- event loop ------------------------------------------------------------------------------
    now = 0.0
    stamp = 0  # added to every key pushed at `now`: its instant << 32 under fcfs, else 0
    finished = 0
    while True:
        # dispatch: every idle resource with queued work starts its next job at `now`
        for i in range(num_dirty):
            r = dirty[i]
            in_dirty[r] = False
            if busy_res[r]:
                continue
            if r < num_dev:
                if dev_size[r] == 0:
                    continue
                key = iheap_pop(ready, dev_base, dev_size, r)
                k = key & 0xFFFFFFFF
                k_start[k] = now
                end = now + dur[k]
                k_end[k] = end
                busy[r] += dur[k]
                if np.isnan(k_alloc[k]):  # fused: add the stored outputs one by one
                    for m in range(member_ptr[k], member_ptr[k + 1]):
                        u = members[m]
                        if op_rec[u, 3]:  # stored
                            cur[r] += g.out_bytes[u]
                else:
                    cur[r] += k_alloc[k]
                if cur[r] > peak_act[r]:
                    peak_act[r] = cur[r]
            else:
                j = r - num_dev
                if l_head[j] == l_tail[j]:
                    continue
                d = link_dst[j]
                if not contention:  # the link never becomes busy
                    num_ev, sent = _start_all(
                        lq, l_head, l_tail, j, d, now, t_start, t_end, charge, cur, peak_act,
                        ev_time, ev_res, num_ev, num_r,
                    )  # fmt: skip
                    moved += sent
                    continue
                i = l_head[j]
                l_head[j] += 1
                k = l_tid[i]  # k: transfer id
                job_op[r] = l_tie[i]
                t_start[k] = now
                end = now + l_dur[i]
                t_end[k] = end
                if charge:
                    cur[d] += l_bytes[i]
                    if cur[d] > peak_act[d]:
                        peak_act[d] = cur[d]
                moved += l_bytes[i]
            busy_res[r] = True
            job[r] = k
            num_ev = _insert_event(ev_time, ev_res, num_ev, end, r)
        num_dirty = 0
        if num_ev == 0:
            break
        if fcfs and ev_time[num_ev - 1] > now:  # a new instant: later than every key queued
            stamp += 1 << 32
        now = ev_time[num_ev - 1]
        # complete every job that ends at `now` before the next dispatch, by resource
        while num_ev > 0 and ev_time[num_ev - 1] == now:
            num_ev -= 1
            r = ev_res[num_ev]
            if r < num_r:
                busy_res[r] = False
                if not in_dirty[r]:
                    in_dirty[r] = True
                    dirty[num_dirty] = r
                    num_dirty += 1
                k = job[r]
            else:  # a transfer without contention
                k = r - num_r
            if r < num_dev:
                finished += 1
                d = r
                for m in range(member_ptr[k], member_ptr[k + 1]):
                    u = members[m]
                    # release the inputs this kernel was the last to need
                    for p in range(op_rec[u, 0], op_rec[u + 1, 0]):
                        if p_slot[p, 0] >= 0:
                            _release(slot_int, slot_float, p_slot[p, 0], cur)
                        if p_slot[p, 1] >= 0:  # the copy on this device
                            _release(slot_int, slot_float, p_slot[p, 1], cur)
                    if op_rec[u + 1, 1] == op_rec[u, 1]:  # graph output: freed when its kernel ends
                        cur[d] -= g.out_bytes[u]
                    # local consumers
                    for e in range(op_rec[u, 1], op_rec[u + 1, 1]):
                        if e_cons[e, 1] == d:
                            h = e_cons[e, 0]
                            need[h] -= 1
                            if need[h] == 0:
                                iheap_push(ready, dev_base, dev_size, d, k_key[h] + stamp)
                    # remote consumers: queue the transfers of this output (second hops
                    # through the host are not among them: they wait for their first hop)
                    for tid in range(op_rec[u, 2], op_rec[u + 1, 2]):
                        j = t_link[tid]
                        enqueue_transfer(
                            lq, l_head, l_tail, j, now, u, tid, t_dur[tid], t_bytes[tid]
                        )
                        lr = num_dev + j
                        if not in_dirty[lr]:  # (written out: as a call, the loop ran slower)
                            in_dirty[lr] = True
                            dirty[num_dirty] = lr
                            num_dirty += 1
            elif plain:
                u = job_op[r]
                d = link_dst[r - num_dev]
                for e in range(op_rec[u, 1], op_rec[u + 1, 1]):
                    if e_cons[e, 1] == d:
                        h = e_cons[e, 0]
                        need[h] -= 1
                        if need[h] == 0:
                            iheap_push(ready, dev_base, dev_size, d, k_key[h] + stamp)
                            if not in_dirty[d]:
                                in_dirty[d] = True
                                dirty[num_dirty] = d
                                num_dirty += 1
            else:  # any other link model: the transfer's own records say what it does
                num_dirty = _arrive(
                    k, now, num_dev, routed, t_op, t_dst, t_edge, t_parent, t_clo, t_chi, t_link,
                    t_dur, t_bytes, op_rec, e_cons, need, k_key, stamp, ready, dev_base, dev_size,
                    slot_int, slot_float, cur, lq, l_head, l_tail, dirty, in_dirty, num_dirty,
                )  # fmt: skip

    # ---- results -------------------------------------------------------------------------------
    peak_mem = np.zeros(num_dev, dtype=np.float64)
    for u in range(n):
        peak_mem[k_dev[kernel_of[u]]] += g.param_bytes[u]
    for d in range(num_dev):
        peak_mem[d] += peak_act[d]
    status = STATUS_OK
    culprit = -1
    step = 0.0
    if finished < num_k:
        status = STATUS_ILLEGAL_FUSION
        step = np.inf
    else:
        for k in range(num_k):
            if k_end[k] > step:
                step = k_end[k]
        for d in range(num_dev):
            if peak_mem[d] > g.capacity[d]:
                status = STATUS_OOM
                culprit = d
                break
    return CoreResult(
        status,
        culprit,
        step,
        busy,
        peak_mem,
        moved,
        kernel_of,
        roots,
        member_ptr,
        members,
        k_dev,
        k_start,
        k_end,
        t_op,
        t_src,
        t_dst,
        t_bytes,
        t_start,
        t_end,
    )


@njit(cache=True, error_model="numpy")
def simulate_batch(graph, placements, priorities, fusions, workspace):
    """Simulate ``B`` decisions (rows of the ``(B, N)`` arrays), one after the other in the
    workspace; ``graph`` and ``workspace`` are plain tuples as in :func:`simulate_core`.

    Returns ``(status[B], culprit[B], step[B], busy[B, D], peak_mem[B, D], moved[B])``.
    """
    g = GraphArrays(*graph)
    ws = Workspace(*workspace)
    num_b = placements.shape[0]
    num_dev = len(g.peak)
    status = np.empty(num_b, dtype=np.int64)
    culprit = np.empty(num_b, dtype=np.int64)
    step = np.empty(num_b, dtype=np.float64)
    busy = np.empty((num_b, num_dev), dtype=np.float64)
    peak_mem = np.empty((num_b, num_dev), dtype=np.float64)
    moved = np.empty(num_b, dtype=np.float64)
    for b in range(num_b):
        out = _simulate(g, placements[b], priorities[b], fusions[b], ws)
        status[b] = out.status
        culprit[b] = out.culprit
        step[b] = out.step
        for d in range(num_dev):  # not busy[b] = out.busy (graphopt.compiled)
            busy[b, d] = out.busy[d]
            peak_mem[b, d] = out.peak_mem[d]
        moved[b] = out.moved
    return status, culprit, step, busy, peak_mem, moved
