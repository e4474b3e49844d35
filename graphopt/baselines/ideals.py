"""Splits over the ideals of a block DAG: the max-load dynamic program of Tarnawski et al.
(NeurIPS 2020, section 4), exact over every contiguous split.

An *ideal* is a downward-closed set of blocks (every predecessor of a member is a member). A
contiguous split onto devices ``0..K-1`` is a chain of ideals ``∅ = I_0 ⊆ I_1 ⊆ ... ⊆ I_K = V``,
device ``k`` holding ``I_{k+1} \\ I_k`` (possibly nothing). The program::

    dp[k, I] = min( dp[k - 1, I],                                   device k left idle
                    min over ideals J ⊊ I of max(dp[k - 1, J], load_k(I \\ J)) )

with ``dp[-1, ∅] = 0`` and ``load_k(S)`` the work of ``S`` on device ``k`` plus the cost of
every edge with exactly one end in ``S`` (its transfers in and out), ``inf`` when the charge of
``S`` exceeds device ``k``'s memory. It is exact: the objective is the least max-load over all
contiguous splits (the tests check it against an exhaustive search), and never above that of the
prefixes of one topological order.

**Bound.** The ideals are enumerated breadth first from ``∅`` (each grows by one block whose
predecessors it holds). Their number can grow exponentially with the DAG's width; as in the
authors' code the enumeration stops at :data:`MAX_IDEALS` with a one-line ``ValueError``, and
the program at :data:`MAX_PAIRS` pairs ``J ⊆ I`` walked (the authors' code keeps every pair in
memory, which bounds it alike).

**Speed.** The pairs ``J ⊆ I`` are walked from each ``I`` down its immediate sub-ideals (one
block off), so the cut of ``I \\ J`` comes from running sums instead of a pass over the edges::

    cut(I \\ J) = cut(I) + cut(J) - 2 w(J, V \\ I),     w(J - b, V \\ I) = w(J, V \\ I) - w(b, V \\ I)

and the walk stops below a ``J`` whose ``I \\ J`` already exceeds every device's memory, or whose
work alone on every device reaches the best load found for ``I`` there (a smaller ``J`` only
charges more and works more; transfers are never negative). The walk and the program run compiled (numba); the tests keep a plain
exhaustive twin.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from graphopt.compiled import INTERNAL
from graphopt.typing import FloatArray, IntArray

MAX_IDEALS = 60_000
"""Most ideals enumerated: the limit of Tarnawski et al.'s own code (``IDEALS_LIMIT``)."""
MAX_PAIRS = 20_000_000
"""Most pairs ``J ⊆ I`` the program walks (a few seconds); the authors' code holds them all in
memory, which bounds it in the same way."""


class Ideals:
    """The ideals of a DAG of ``B`` blocks, in breadth-first order (``0`` is the empty set).

    Attributes:
        words: ``(I, W)`` ``uint64`` members of each ideal, block ``b`` in bit ``b % 64`` of word
            ``b // 64``.
        link_ptr: ``(I + 1,)`` CSR offsets of each ideal's immediate sub-ideals.
        link_sub: the immediate sub-ideals (the ideal with one block fewer).
        link_block: the block each link takes off.
    """

    def __init__(self, num_blocks: int, src: IntArray, dst: IntArray, limit: int = MAX_IDEALS):
        """Enumerate the ideals of the DAG with edges ``src -> dst``.

        Raises:
            ValueError: more than ``limit`` ideals.
        """
        preds = [0] * num_blocks
        succs: list[list[int]] = [[] for _ in range(num_blocks)]
        for a, b in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), strict=True):
            preds[b] |= 1 << a
            succs[a].append(b)
        sets = [0]
        index = {0: 0}
        ready = [sum(1 << b for b in range(num_blocks) if preds[b] == 0)]
        links: list[list[tuple[int, int]]] = [[]]
        i = 0
        while i < len(sets):  # breadth first: ideals come in order of size
            current, free = sets[i], ready[i]
            bits = free
            while bits:
                low = bits & -bits
                bits ^= low
                b = low.bit_length() - 1
                grown = current | low
                j = index.get(grown)
                if j is None:
                    if len(sets) >= limit:
                        raise ValueError(
                            f"the block DAG ({num_blocks} blocks) has more than {limit:,} ideals, "
                            "the bound of Tarnawski et al.'s dynamic program; its graph is too "
                            "wide for a split over all contiguous sets"
                        )
                    j = len(sets)
                    index[grown] = j
                    sets.append(grown)
                    nxt = free ^ low
                    for s in succs[b]:
                        if preds[s] & ~grown == 0:
                            nxt |= 1 << s
                    ready.append(nxt)
                    links.append([])
                links[j].append((i, b))
            i += 1
        num_words = max(1, (num_blocks + 63) // 64)
        self.num_blocks = num_blocks
        self.words = (
            np.frombuffer(b"".join(s.to_bytes(8 * num_words, "little") for s in sets), dtype="<u8")
            .reshape(len(sets), num_words)
            .astype(np.uint64)
        )
        counts = np.array([len(x) for x in links], dtype=np.int64)
        self.link_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        flat = [pair for x in links for pair in x]
        self.link_sub = np.array([p[0] for p in flat], dtype=np.int64)
        self.link_block = np.array([p[1] for p in flat], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.words)

    def members(self, i: int) -> IntArray:
        """The blocks of ideal ``i``."""
        bits = np.unpackbits(self.words[i].astype("<u8").view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.num_blocks]).astype(np.int64)


@functools.lru_cache(maxsize=8)
def _cached(num_blocks: int, src: bytes, dst: bytes, limit: int) -> Ideals | ValueError:
    try:
        return Ideals(
            num_blocks,
            np.frombuffer(src, dtype=np.int64),
            np.frombuffer(dst, dtype=np.int64),
            limit,
        )
    except ValueError as e:
        return e


def ideals_of(num_blocks: int, src: IntArray, dst: IntArray, limit: int = MAX_IDEALS) -> Ideals:
    """:class:`Ideals` of the DAG, the last few kept (a placer run on every sub-cluster of a
    cluster asks for the same DAG again; a refusal is kept too, so it costs one enumeration).

    Raises:
        ValueError: more than ``limit`` ideals.
    """
    key_src = np.ascontiguousarray(src, dtype=np.int64).tobytes()
    key_dst = np.ascontiguousarray(dst, dtype=np.int64).tobytes()
    found = _cached(num_blocks, key_src, key_dst, limit)
    if isinstance(found, ValueError):
        raise ValueError(str(found))
    return found


def _adjacency(num_blocks: int, src: IntArray, dst: IntArray, cost: FloatArray):
    """CSR of the undirected, weighted block graph of the costed edges."""
    a = np.concatenate((src, dst))
    b = np.concatenate((dst, src))
    w = np.concatenate((cost, cost)).astype(np.float64)
    order = np.argsort(a, kind="stable")
    ptr = np.zeros(num_blocks + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=num_blocks), out=ptr[1:])
    return ptr, b[order].astype(np.int64), w[order]


@njit(cache=True, **INTERNAL)
def _member(words, i, block):
    return (words[i, block >> 6] >> np.uint64(block & 63)) & np.uint64(1)


@njit(cache=True)
def _ideal_dp(
    words, link_ptr, link_sub, link_block, work, charge, capacity, adj_ptr, adj, adj_w, max_pairs
):
    """``(dp, arg, pairs)`` of the module docstring: ``arg[k, i]`` is the sub-ideal ``J`` whose
    difference device ``k`` holds, ``-1`` when it stays idle; ``pairs`` the pairs walked, the
    walk given up (``pairs > max_pairs``) past the bound."""
    n = link_ptr.shape[0] - 1
    num_dev = capacity.shape[0]
    top_capacity = capacity.max()
    work_i = np.zeros((n, num_dev))
    charge_i = np.zeros(n)
    cut_i = np.zeros(n)
    for i in range(1, n):
        p = link_sub[link_ptr[i]]
        b = link_block[link_ptr[i]]
        for d in range(num_dev):  # not work_i[i] = work_i[p] + work[b] (graphopt.compiled)
            work_i[i, d] = work_i[p, d] + work[b, d]
        charge_i[i] = charge_i[p] + charge[b]
        total = 0.0
        inside = 0.0
        for e in range(adj_ptr[b], adj_ptr[b + 1]):
            total += adj_w[e]
            if _member(words, p, adj[e]):
                inside += adj_w[e]
        cut_i[i] = cut_i[p] + total - 2.0 * inside
    dp = np.full((num_dev, n), np.inf)
    arg = np.full((num_dev, n), -1, dtype=np.int64)
    dp[:, 0] = 0.0
    stamp = np.full(n, -1, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    stack_out = np.empty(n)  # w(J, V \ I) of each stacked J
    best = np.empty(num_dev)
    best_j = np.empty(num_dev, dtype=np.int64)
    pairs = 0
    for i in range(1, n):
        best[:] = np.inf
        best_j[:] = -1
        if charge_i[i] <= capacity[0]:
            best[0] = work_i[i, 0] + cut_i[i]
            best_j[0] = 0
        top = 0
        stack[0] = i
        stack_out[0] = cut_i[i]
        stamp[i] = i
        while top >= 0:
            j = stack[top]
            out_j = stack_out[top]
            top -= 1
            pairs += 1
            if pairs > max_pairs:
                return dp, arg, pairs
            mem = charge_i[i] - charge_i[j]
            if mem > top_capacity:
                continue  # every smaller J charges more
            hopeless = True  # no smaller J can beat best on any device: its work only grows
            if j != i:
                comm = cut_i[i] + cut_i[j] - 2.0 * out_j
                for k in range(1, num_dev):  # device 0 holds all of I (set above)
                    if mem > capacity[k]:
                        continue
                    held = work_i[i, k] - work_i[j, k]
                    if held < best[k]:
                        hopeless = False
                    value = max(dp[k - 1, j], held + comm)
                    if value < best[k]:
                        best[k] = value
                        best_j[k] = j
            else:
                hopeless = False
            if hopeless:
                continue
            for e in range(link_ptr[j], link_ptr[j + 1]):
                sub = link_sub[e]
                if stamp[sub] == i:
                    continue
                stamp[sub] = i
                b = link_block[e]
                lost = 0.0
                for f in range(adj_ptr[b], adj_ptr[b + 1]):
                    if not _member(words, i, adj[f]):
                        lost += adj_w[f]
                top += 1
                stack[top] = sub
                stack_out[top] = out_j - lost
        for k in range(num_dev):
            idle = dp[k - 1, i] if k > 0 else np.inf
            if idle <= best[k]:  # ties to fewer devices
                dp[k, i] = idle
                arg[k, i] = -1
            else:
                dp[k, i] = best[k]
                arg[k, i] = best_j[k]
    return dp, arg, pairs


def ideal_split(
    ideals: Ideals,
    work: FloatArray,
    charge: FloatArray,
    capacity: FloatArray,
    edge_src: IntArray,
    edge_dst: IntArray,
    edge_cost: FloatArray,
    max_pairs: int = MAX_PAIRS,
) -> tuple[float, IntArray]:
    """The least max-load split over the ideals (module docstring).

    Args:
        ideals: the ideals of the block DAG.
        work: ``(B, K)`` seconds of each block on each device, in device order.
        charge: ``(B,)`` bytes each block charges its device.
        capacity: ``(K,)`` bytes of each device.
        edge_src, edge_dst, edge_cost: the costed edges between blocks (either direction).
        max_pairs: most pairs ``J ⊆ I`` walked.

    Returns:
        ``(max_load, stage)``: ``stage[b]`` is the device (``0..K-1``) of block ``b``; ``inf``
        and an empty array when no split fits the capacities.

    Raises:
        ValueError: more than ``max_pairs`` pairs walked.
    """
    b = ideals.num_blocks
    ptr, adj, adj_w = _adjacency(
        b, np.asarray(edge_src, np.int64), np.asarray(edge_dst, np.int64), edge_cost
    )
    dp, arg, pairs = _ideal_dp(
        ideals.words,
        ideals.link_ptr,
        ideals.link_sub,
        ideals.link_block,
        np.ascontiguousarray(work, dtype=np.float64),
        np.asarray(charge, dtype=np.float64),
        np.asarray(capacity, dtype=np.float64),
        ptr,
        adj,
        adj_w,
        max_pairs,
    )
    if pairs > max_pairs:
        raise ValueError(
            f"the split of {b} blocks walks more than {max_pairs:,} pairs of nested ideals "
            f"({len(ideals):,} ideals); its graph is too wide for a split over all contiguous sets"
        )
    full = len(ideals) - 1  # breadth first: the whole set comes last
    k = dp.shape[0] - 1
    objective = float(dp[k, full])
    if b == 0 or not np.isfinite(objective):
        return float("inf"), np.zeros(0, dtype=np.int64)
    stage = np.full(b, -1, dtype=np.int64)
    current = full
    while current != 0:
        j = int(arg[k, current])
        if j >= 0:
            held = np.setdiff1d(ideals.members(current), ideals.members(j))
            stage[held] = k
            current = j
        k -= 1
    assert np.all(stage >= 0)
    return objective, stage
