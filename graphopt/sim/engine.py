"""The compiled event loop of the simulator (numba). The rules are in :mod:`graphopt.sim`'s docstring;
the readable twin that must agree with this code exactly is ``tests/graphopt/sim/reference.py``.

Performance notes (why the code looks like this):

- Everything is flat ``int64``/``float64`` arrays; heaps live in preallocated slices of one array
  per kind (:mod:`graphopt.sim.heaps`), sized by a pre-pass, so the event loop never allocates.
- The per-op and per-edge arrays are rows of a :class:`Workspace` that the caller allocates once
  per prepared graph and passes to every call. Fresh arrays of this size would come from ``mmap``
  and pay a page fault per 4 KiB on first touch: that alone cost a third of the time on 80k ops.
- The consumer kernel of every edge (``e_kernel``) and the producer kernel of every in-edge
  (``p_kernel``) are stored once per decision, so the hot loops read them sequentially instead of
  chasing ``kernel_of[succ_dst[e]]``.
- Transfers are known before the loop starts: the pre-pass creates one transfer per
  ``(producer op, remote device)`` and counts transfers per link, which sizes the link queues.
- Without fusion the kernels are the ops themselves (no union-find, no member lists to build).
- Illegal fusion is detected for free: a cyclic kernel graph deadlocks the event loop, so kernels
  left unfinished when no event remains mean the fusion was illegal.
- Link queues are FIFO slices, not heaps: transfers are queued at the current time, which never
  decreases, so ``(queue time, producer)`` order only needs a sorted insert among the entries
  queued at the same instant.
- Dispatch only visits resources marked dirty (freed, or given new work) since the last dispatch,
  instead of scanning all ``D + D*D`` devices and links after every event.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.sim.heaps import fheap_pop, fheap_push, iheap_pop, iheap_push

STATUS_OK = 0
STATUS_OOM = 1
STATUS_ILLEGAL_FUSION = 2

# Rows of the workspace. Per-op int rows have length N + 1, per-edge rows length E + 1.
_OP_INT_ROWS = 13
_EDGE_INT_ROWS = 8
_OP_FLOAT_ROWS = 3
_EDGE_FLOAT_ROWS = 4


class Workspace:
    """Scratch arrays for :func:`simulate_core`, sized for one graph, reused across calls.

    Not thread-safe: one workspace serves one call at a time.
    """

    def __init__(self, num_ops: int, num_edges: int) -> None:
        self.op_int = np.empty((_OP_INT_ROWS, num_ops + 1), dtype=np.int64)
        self.edge_int = np.empty((_EDGE_INT_ROWS, num_edges + 1), dtype=np.int64)
        self.op_float = np.empty((_OP_FLOAT_ROWS, num_ops + 1), dtype=np.float64)
        self.edge_float = np.empty((_EDGE_FLOAT_ROWS, num_edges + 1), dtype=np.float64)
        self.op_bool = np.empty((1, num_ops + 1), dtype=np.bool_)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.op_int, self.edge_int, self.op_float, self.edge_float, self.op_bool


@njit(cache=True, error_model="numpy")
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
    """Group ops into kernels, writing into rows 0-7 of ``op_int``.

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
    rep = op_int[5, :n]
    last = op_int[6, :n]
    kid = op_int[7, :n]
    for i in range(n):
        parent[i] = i
    for u in range(n):
        if fusion[u] != 0:
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                a = _find(parent, u)
                b = _find(parent, succ_dst[e])
                if a != b:
                    if a < b:
                        parent[a] = b
                    else:
                        parent[b] = a
    for i in range(n):
        r = _find(parent, i)
        rep[i] = r
        last[r] = i  # ascending i: ends as the group's highest index
    k = 0
    for i in range(n):
        if last[rep[i]] == i:
            kid[rep[i]] = k
            roots[k] = i
            k += 1
    for i in range(k + 1):
        ptr[i] = 0
    for i in range(n):
        kernel_of[i] = kid[rep[i]]
        ptr[kernel_of[i] + 1] += 1
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


@njit(cache=True, error_model="numpy")
def kernel_durations(
    kernel_of,
    roots,
    member_ptr,
    members,
    k_dev,
    succ_ptr,
    succ_dst,
    edge_bytes,
    flops,
    nbytes,
    out_bytes,
    op_time,
    op_meas,
    peak,
    bw,
    launch,
    dur,
):
    """Duration of every kernel on its device (rules 3-4 of :mod:`graphopt.sim`), into ``dur``."""
    num_k = len(roots)
    for k in range(num_k):
        d = k_dev[k]
        lo = member_ptr[k]
        hi = member_ptr[k + 1]
        if hi - lo == 1:
            dur[k] = op_time[members[lo], d]
            continue
        sf = 0.0
        sb = 0.0
        smeas = 0.0
        mmax = 0.0
        all_meas = True
        for m in range(lo, hi):
            u = members[m]
            sf += flops[u]
            sb += nbytes[u]
            t = op_meas[u, d]
            if np.isnan(t):
                all_meas = False
            else:
                smeas += t
                mmax = max(mmax, t)
        for m in range(lo, hi):  # subtract what no longer crosses the kernel's border
            u = members[m]
            has_cons = False
            inner = True
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                has_cons = True
                if kernel_of[succ_dst[e]] == k:
                    sb -= edge_bytes[e]
                else:
                    inner = False
            if has_cons and inner:
                sb -= out_bytes[u]
        sb = max(sb, 0.0)
        if all_meas:
            dur[k] = max(smeas - (hi - lo - 1) * launch[d], mmax)
        else:
            dur[k] = max(sf / peak[d], sb / bw[d]) + launch[d]
    return dur[:num_k]


@njit(cache=True, error_model="numpy")
def simulate_core(
    succ_ptr,
    succ_dst,
    edge_bytes,
    pred_ptr,
    pred_src,
    flops,
    nbytes,
    out_bytes,
    param_bytes,
    op_time,
    op_meas,
    peak,
    bw,
    launch,
    capacity,
    link_bw,
    link_lat,
    placement,
    priority,
    fusion,
    op_int,
    edge_int,
    op_float,
    edge_float,
    op_bool,
):
    """Simulate one decision. See :mod:`graphopt.sim` for the rules. The last five arguments are a
    :class:`Workspace`'s arrays; the per-op and per-kernel arrays returned are views into them,
    valid until the next call with the same workspace.

    Returns a tuple ``(status, culprit, step_time, busy[D], peak_mem[D], bytes_moved,
    kernel_of[N], roots[K], member_ptr[K+1], members[N], k_dev[K], k_start[K], k_end[K],
    t_op[T], t_src[T], t_dst[T], t_bytes[T], t_start[T], t_end[T])`` where ``status`` is one of
    ``STATUS_*`` and ``culprit`` the OOM device (or -1).
    """
    n = len(flops)
    num_dev = len(peak)
    num_e = len(succ_dst)
    kernel_of, roots, member_ptr, members = build_kernels(succ_ptr, succ_dst, fusion, op_int)
    num_k = len(roots)
    k_dev = op_int[4, :num_k]
    k_key = op_int[5, :num_k]
    dev_count = np.zeros(num_dev, dtype=np.int64)
    for k in range(num_k):
        r = roots[k]
        k_dev[k] = placement[r]
        k_key[k] = (priority[r] << 32) | k  # kernels are numbered by root: k orders like r
        dev_count[k_dev[k]] += 1
    dur = kernel_durations(
        kernel_of,
        roots,
        member_ptr,
        members,
        k_dev,
        succ_ptr,
        succ_dst,
        edge_bytes,
        flops,
        nbytes,
        out_bytes,
        op_time,
        op_meas,
        peak,
        bw,
        launch,
        op_float[0],
    )

    # ---- pre-pass: dependencies, reference counts, transfers ---------------------------------
    need = op_int[6, :num_k]  # unmet input edges per kernel
    ref = op_int[7, :n]  # consumer kernels still to finish, per output
    ext = op_int[8, :n]  # distinct consumer kernels outside the op's own kernel
    kmark = op_int[9, :num_k]
    t_first = op_int[10, : n + 1]
    stored = op_bool[0, :n]
    t_op = edge_int[0, :num_e]
    t_src = edge_int[1, :num_e]
    t_dst = edge_int[2, :num_e]
    t_ref = edge_int[3, :num_e]
    e_kernel = edge_int[6, :num_e]  # consumer kernel of each out-edge (succ order)
    p_kernel = edge_int[7, :num_e]  # producer kernel of each in-edge (pred order)
    t_bytes = edge_float[0, :num_e]
    need[:] = 0
    ext[:] = 0
    kmark[:] = -1
    t_ref[:] = 0
    dmark = np.full(num_dev, -1, dtype=np.int64)
    dtid = np.zeros(num_dev, dtype=np.int64)
    for p in range(num_e):
        p_kernel[p] = kernel_of[pred_src[p]]
    link_count = np.zeros(num_dev * num_dev, dtype=np.int64)
    num_t = 0
    for u in range(n):
        g = kernel_of[u]
        s = k_dev[g]
        t_first[u] = num_t
        has_cons = False
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            has_cons = True
            h = kernel_of[succ_dst[e]]
            e_kernel[e] = h
            if h == g:
                continue
            need[h] += 1
            new_consumer = kmark[h] != u
            if new_consumer:
                kmark[h] = u
                ext[u] += 1
            t = k_dev[h]
            if t != s:
                if dmark[t] != u:
                    dmark[t] = u
                    dtid[t] = num_t
                    t_op[num_t] = u
                    t_src[num_t] = s
                    t_dst[num_t] = t
                    t_bytes[num_t] = edge_bytes[e]
                    link_count[s * num_dev + t] += 1
                    num_t += 1
                elif edge_bytes[e] > t_bytes[dtid[t]]:
                    t_bytes[dtid[t]] = edge_bytes[e]
                if new_consumer:
                    t_ref[dtid[t]] += 1
        stored[u] = (not has_cons) or ext[u] > 0
        ref[u] = ext[u]
    t_first[n] = num_t

    # ---- queues --------------------------------------------------------------------------------
    ready = op_int[11, :num_k]
    dev_base = np.zeros(num_dev, dtype=np.int64)
    for d in range(1, num_dev):
        dev_base[d] = dev_base[d - 1] + dev_count[d - 1]
    dev_size = np.zeros(num_dev, dtype=np.int64)
    num_l = num_dev * num_dev
    l_time = edge_float[1]
    l_tie = edge_int[4]
    l_tid = edge_int[5]
    l_base = np.zeros(num_l, dtype=np.int64)
    for j in range(1, num_l):
        l_base[j] = l_base[j - 1] + link_count[j - 1]
    l_head = l_base.copy()  # link queues: FIFO slices [l_head[j], l_tail[j]) of the l_* rows
    l_tail = l_base.copy()
    num_r = num_dev + num_l  # resources: devices, then links s*D+t
    ev_time = np.empty(num_r, dtype=np.float64)
    ev_tie = np.empty(num_r, dtype=np.int64)
    ev_res = np.empty(num_r, dtype=np.int64)
    ev_base = np.zeros(1, dtype=np.int64)
    ev_size = np.zeros(1, dtype=np.int64)
    busy_res = np.zeros(num_r, dtype=np.bool_)
    job = np.empty(num_r, dtype=np.int64)
    dirty = np.empty(num_r, dtype=np.int64)
    in_dirty = np.zeros(num_r, dtype=np.bool_)
    num_dirty = 0

    cur = np.zeros(num_dev, dtype=np.float64)
    peak_act = np.zeros(num_dev, dtype=np.float64)
    busy = np.zeros(num_dev, dtype=np.float64)
    k_start = op_float[1, :num_k]
    k_end = op_float[2, :num_k]
    t_start = edge_float[2, :num_t]
    t_end = edge_float[3, :num_t]
    fmark = op_int[12, :n]
    k_start[:] = np.nan
    k_end[:] = np.nan
    t_start[:] = np.nan
    t_end[:] = np.nan
    fmark[:] = -1
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
                for m in range(member_ptr[k], member_ptr[k + 1]):
                    u = members[m]
                    if stored[u]:
                        cur[r] += out_bytes[u]
                if cur[r] > peak_act[r]:
                    peak_act[r] = cur[r]
            else:
                j = r - num_dev
                if l_head[j] == l_tail[j]:
                    continue
                k = l_tid[l_head[j]]  # k: transfer id
                l_head[j] += 1
                t_start[k] = now
                end = now + (
                    link_lat[t_src[k], t_dst[k]] + t_bytes[k] / link_bw[t_src[k], t_dst[k]]
                )
                t_end[k] = end
                d = t_dst[k]
                cur[d] += t_bytes[k]
                if cur[d] > peak_act[d]:
                    peak_act[d] = cur[d]
                moved += t_bytes[k]
            busy_res[r] = True
            job[r] = k
            fheap_push(ev_time, ev_tie, ev_res, ev_base, ev_size, 0, end, r, r)
        num_dirty = 0
        if ev_size[0] == 0:
            break
        now = ev_time[0]
        # complete every job that ends at `now` before the next dispatch
        while ev_size[0] > 0 and ev_time[0] == now:
            r = fheap_pop(ev_time, ev_tie, ev_res, ev_base, ev_size, 0)
            busy_res[r] = False
            if not in_dirty[r]:
                in_dirty[r] = True
                dirty[num_dirty] = r
                num_dirty += 1
            k = job[r]
            if r < num_dev:
                finished += 1
                d = r
                for m in range(member_ptr[k], member_ptr[k + 1]):
                    u = members[m]
                    # release the inputs this kernel was the last to need
                    for p in range(pred_ptr[u], pred_ptr[u + 1]):
                        w = pred_src[p]
                        g = p_kernel[p]
                        if g == k or fmark[w] == k:
                            continue
                        fmark[w] = k
                        ref[w] -= 1
                        if ref[w] == 0:
                            cur[k_dev[g]] -= out_bytes[w]
                        if k_dev[g] != d:
                            for tid in range(t_first[w], t_first[w + 1]):
                                if t_dst[tid] == d:
                                    t_ref[tid] -= 1
                                    if t_ref[tid] == 0:
                                        cur[d] -= t_bytes[tid]
                                    break
                    if stored[u] and ext[u] == 0:  # graph output: freed when its kernel ends
                        cur[d] -= out_bytes[u]
                    # local consumers
                    for e in range(succ_ptr[u], succ_ptr[u + 1]):
                        h = e_kernel[e]
                        if h != k and k_dev[h] == d:
                            need[h] -= 1
                            if need[h] == 0:
                                iheap_push(ready, dev_base, dev_size, d, k_key[h])
                    # remote consumers: queue the transfers of this output
                    for tid in range(t_first[u], t_first[u + 1]):
                        j = t_src[tid] * num_dev + t_dst[tid]
                        # Queue order is (queue time, producer). Times only grow, so this is a
                        # FIFO in which entries queued at the same instant are kept sorted by
                        # producer: insert from the tail (nearly always at the tail itself).
                        i = l_tail[j]
                        l_tail[j] += 1
                        while i > l_head[j] and l_time[i - 1] == now and l_tie[i - 1] > u:
                            l_time[i] = l_time[i - 1]
                            l_tie[i] = l_tie[i - 1]
                            l_tid[i] = l_tid[i - 1]
                            i -= 1
                        l_time[i] = now
                        l_tie[i] = u
                        l_tid[i] = tid
                        lr = num_dev + j
                        if not in_dirty[lr]:
                            in_dirty[lr] = True
                            dirty[num_dirty] = lr
                            num_dirty += 1
            else:
                u = t_op[k]
                d = t_dst[k]
                g = kernel_of[u]
                for e in range(succ_ptr[u], succ_ptr[u + 1]):
                    h = e_kernel[e]
                    if h != g and k_dev[h] == d:
                        need[h] -= 1
                        if need[h] == 0:
                            iheap_push(ready, dev_base, dev_size, d, k_key[h])
                            if not in_dirty[d]:
                                in_dirty[d] = True
                                dirty[num_dirty] = d
                                num_dirty += 1

    # ---- results -------------------------------------------------------------------------------
    peak_mem = np.zeros(num_dev, dtype=np.float64)
    for u in range(n):
        peak_mem[k_dev[kernel_of[u]]] += param_bytes[u]
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
            if peak_mem[d] > capacity[d]:
                status = STATUS_OOM
                culprit = d
                break
    return (
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
        t_op[:num_t],
        t_src[:num_t],
        t_dst[:num_t],
        t_bytes[:num_t],
        t_start,
        t_end,
    )


@njit(cache=True, error_model="numpy")
def simulate_batch(
    succ_ptr,
    succ_dst,
    edge_bytes,
    pred_ptr,
    pred_src,
    flops,
    nbytes,
    out_bytes,
    param_bytes,
    op_time,
    op_meas,
    peak,
    bw,
    launch,
    capacity,
    link_bw,
    link_lat,
    placements,
    priorities,
    fusions,
    op_int,
    edge_int,
    op_float,
    edge_float,
    op_bool,
):
    """Simulate ``B`` decisions (rows of the ``(B, N)`` arrays) of one graph.

    Returns ``(status[B], culprit[B], step[B], busy[B, D], peak_mem[B, D], moved[B])``.
    """
    num_b = placements.shape[0]
    num_dev = len(peak)
    status = np.empty(num_b, dtype=np.int64)
    culprit = np.empty(num_b, dtype=np.int64)
    step = np.empty(num_b, dtype=np.float64)
    busy = np.empty((num_b, num_dev), dtype=np.float64)
    peak_mem = np.empty((num_b, num_dev), dtype=np.float64)
    moved = np.empty(num_b, dtype=np.float64)
    for b in range(num_b):
        out = simulate_core(
            succ_ptr,
            succ_dst,
            edge_bytes,
            pred_ptr,
            pred_src,
            flops,
            nbytes,
            out_bytes,
            param_bytes,
            op_time,
            op_meas,
            peak,
            bw,
            launch,
            capacity,
            link_bw,
            link_lat,
            placements[b],
            priorities[b],
            fusions[b],
            op_int,
            edge_int,
            op_float,
            edge_float,
            op_bool,
        )
        status[b] = out[0]
        culprit[b] = out[1]
        step[b] = out[2]
        busy[b] = out[3]
        peak_mem[b] = out[4]
        moved[b] = out[5]
    return status, culprit, step, busy, peak_mem, moved
