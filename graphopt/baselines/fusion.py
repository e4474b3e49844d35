"""Fusion baselines: no fusion, an XLA-like rule set, and simulator-guided greedy fusion.

Every fuser respects the fusion rules of the simulator (:mod:`graphopt.sim.fusion_rules`).

Each fuser takes ``(graph, cluster, decision)`` and returns ``int64`` fusion bits, one per op in
topological order, for the decision's placement and priorities (:data:`FUSERS`). The semantics are
the simulator's (:mod:`graphopt.sim`, rules 1-2): an op whose bit is 1 is merged with *every* one of
its consumers; a kernel holds at most one contraction or reduction, never an opaque op or a source,
and stays on one device; a fusion whose contracted kernel graph has a cycle is illegal.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphopt.baselines.inductor import inductor_fusion
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.op_classes import DATA_MOVEMENT, ELEMENTWISE, REDUCTION
from graphopt.sim import PreparedGraph
from graphopt.sim.fusion_rules import RULE_IO, FusionRules, fusion_mask
from graphopt.typing import Decision, IntArray

Fuser = Callable[[CompGraph, Cluster, Decision], IntArray]
"""A fusion heuristic: ``(graph, cluster, decision) -> fusion bits`` for the decision's placement
and priorities."""

_CONSUMERS = frozenset((ELEMENTWISE, DATA_MOVEMENT, REDUCTION))
"""The classes of a consumer the "xla" fuser fuses a producer into."""

MAX_KERNEL_OPS = 32
"""Default cap on the number of ops in one kernel built by the "xla" fuser."""


def no_fusion(graph: CompGraph, cluster: Cluster, decision: Decision) -> IntArray:
    """All bits 0: every op is its own kernel."""
    return np.zeros(graph.num_ops, dtype=np.int64)


def xla_fusion(
    graph: CompGraph,
    cluster: Cluster,
    decision: Decision,
    *,
    max_kernel_ops: int = MAX_KERNEL_OPS,
    visit: IntArray | None = None,
) -> IntArray:
    """XLA-like default fusion: each op fused into its single consumer where the rules allow.

    Rule: op ``u`` gets bit 1 when

    1. ``u`` has **exactly one** consumer ``v`` (no duplication of multi-consumer producers: in
       our semantics a bit merges ``u`` with *all* its consumers, and XLA would instead duplicate
       ``u`` into each of them, which the simulator cannot express);
    2. ``u``'s bit is not masked (:func:`graphopt.sim.fusion_rules.fusion_mask`: neither is opaque
       or a source, and not both are heroes) and ``v`` is elementwise, data movement or a
       reduction (XLA's loop and input fusions; a contraction consumer is left alone, as cuBLAS
       and cuDNN calls take their inputs from memory);
    3. the merged kernel keeps at most one hero and no data movement beside a contraction
       (rule 2b), and ``u`` and ``v`` are on the same device in ``decision.placement`` (rule 2c);
    4. the merged kernel has at most ``max_kernel_ops`` ops (ops are visited in topological order
       and a merge that would exceed the cap is skipped; XLA bounds fusion size likewise).

    Finally, a kernel with more than ``MAX_KERNEL_IO`` inputs plus outputs (rule 2d) is split
    back into single ops. The result is always legal: rules 2a-2d by construction, and acyclic
    because every op with bit 1 has exactly one consumer, so each kernel is an in-tree whose root
    is its only member with out-edges leaving the kernel; every edge between two kernels
    ``K -> K'`` leaves from ``root(K)`` and enters some member ``w`` of ``K'``, hence
    ``root(K) < w <= root(K')``: root indices strictly increase along every path of the
    contracted graph, which therefore has no cycle.

    Args:
        graph: the computation graph.
        cluster: the devices (unused; part of the fuser signature).
        decision: its placement is read (``None``: all on device 0).
        max_kernel_ops: most ops in one fused kernel (>= 1; 1 disables fusion).
        visit: the candidate ops to try, in the order to try them (None: every op, in
            topological order). Ops left out keep bit 0. Legality does not depend on the order
            (every fused op has one consumer); :mod:`graphopt.decoders.fusion` sets it.

    Raises:
        ValueError: ``max_kernel_ops < 1``.
    """
    if max_kernel_ops < 1:
        raise ValueError(f"max_kernel_ops must be >= 1, got {max_kernel_ops}")
    n = graph.num_ops
    bits = np.zeros(n, dtype=np.int64)
    placement = (
        np.zeros(n, dtype=np.int64)
        if decision.placement is None
        else np.asarray(decision.placement)
    )
    indptr, dst = graph.successors_csr
    single = np.flatnonzero((np.diff(indptr) == 1) & (fusion_mask(graph) == 1))
    if visit is not None:
        turn = np.full(n, -1, dtype=np.int64)
        turn[np.asarray(visit, dtype=np.int64)] = np.arange(len(visit))
        single = single[turn[single] >= 0]
        single = single[np.argsort(turn[single], kind="stable")]
    if len(single) == 0:
        return bits
    consumer = dst[indptr[single]]
    classes = graph.op_classes
    ok = placement[single] == placement[consumer]
    ok &= np.array([classes[v] in _CONSUMERS for v in consumer.tolist()], dtype=bool)
    # Union-find with sizes and, per kernel, whether it holds a hero, a contraction, data
    # movement (the rules' own per-op flags to start); ops in topological order (single ascends).
    rules = FusionRules(graph)
    parent = np.arange(n)
    size = np.ones(n, dtype=np.int64)
    hero, gemm, moves = rules.hero.copy(), rules.contraction.copy(), rules.movement.copy()

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    for u, v in zip(single[ok].tolist(), consumer[ok].tolist(), strict=True):
        a, b = find(u), find(v)
        if size[a] + size[b] > max_kernel_ops or (hero[a] and hero[b]):
            continue
        if (gemm[a] or gemm[b]) and (moves[a] or moves[b]):
            continue
        parent[a] = b
        size[b] += size[a]
        hero[b] |= hero[a]
        gemm[b] |= gemm[a]
        moves[b] |= moves[a]
        bits[u] = 1
    rule, root, _ = rules.violation(placement, bits)
    while rule == RULE_IO:  # split the kernel back into single ops
        members = [i for i in range(n) if bits[i] and find(i) == find(root)]
        bits[members] = 0
        rule, root, _ = rules.violation(placement, bits)
    return bits


def greedy_fusion(
    graph: CompGraph,
    cluster: Cluster,
    decision: Decision,
    *,
    budget: int = 200,
    start: str = "xla",
    batch_size: int = 32,
) -> IntArray:
    """Simulator-guided greedy fusion: set one more fusion bit at a time while step time improves.

    Starting from the ``start`` fuser's bits, the candidates are the ops with bit 0 that
    :func:`~graphopt.sim.fusion_rules.fusion_mask` allows, visited in topological order in batches of ``batch_size``; each candidate's flip
    (0 -> 1) is simulated with :meth:`~graphopt.sim.PreparedGraph.evaluate_batch` against the
    current bits, and the best flip of the batch that is valid (legal and in memory) and strictly
    faster (or the first valid one, while the current bits are invalid) is kept. A pass ends when
    every candidate has been tried; passes repeat while they improve something, until ``budget``
    simulations are spent (the start's own simulation included). Deterministic; the result is never
    worse than the start (measured as ``(invalid, step time)``).

    Args:
        graph: the computation graph.
        cluster: the devices and links.
        decision: the placement and priorities to fuse for (its fusion bits are ignored).
        budget: most simulator evaluations (>= 1).
        start: ``"xla"`` or ``"none"``: the bits to start from.
        batch_size: candidates simulated per batch (>= 1).

    Raises:
        ValueError: a bad ``budget``, ``start`` or ``batch_size``.
    """
    if budget < 1 or batch_size < 1:
        raise ValueError(f"budget and batch_size must be >= 1, got {budget} and {batch_size}")
    if start not in ("xla", "none"):
        raise ValueError(f"unknown start {start!r}; choose 'xla' or 'none'")
    n = graph.num_ops
    bits = (xla_fusion if start == "xla" else no_fusion)(graph, cluster, decision)
    if n == 0:
        return bits
    prepared = PreparedGraph(graph, cluster)
    zeros = np.zeros(n, dtype=np.int64)
    placement = zeros if decision.placement is None else np.asarray(decision.placement, np.int64)
    priority = zeros if decision.priority is None else np.asarray(decision.priority, np.int64)

    def run(fusions: IntArray) -> tuple[np.ndarray, np.ndarray]:
        b = len(fusions)
        out = prepared.evaluate_batch(
            np.broadcast_to(placement, (b, n)), np.broadcast_to(priority, (b, n)), fusions
        )
        return out.valid, out.step_time

    valid, step = run(bits[None, :])
    best = (not bool(valid[0]), float(step[0]))
    used = 1
    allowed = fusion_mask(graph) == 1  # bits that are never legal are not tried
    improved = True
    while improved and used < budget:
        improved = False
        candidates = np.flatnonzero((bits == 0) & allowed)
        for pos in range(0, len(candidates), batch_size):
            if used >= budget:
                break
            chunk = candidates[pos : pos + min(batch_size, budget - used)]
            trial = np.repeat(bits[None, :], len(chunk), axis=0)
            trial[np.arange(len(chunk)), chunk] = 1
            valid, step = run(trial)
            used += len(chunk)
            keys = [(not bool(v), float(s)) for v, s in zip(valid, step, strict=True)]
            k = min(range(len(chunk)), key=lambda i: keys[i])
            if not keys[k][0] and keys[k] < best:
                bits[chunk[k]] = 1
                best = keys[k]
                improved = True
    return bits


FUSERS: dict[str, Fuser] = {
    "none": no_fusion,
    "xla": xla_fusion,
    "greedy": greedy_fusion,
    "inductor": inductor_fusion,
}
"""Fusion baselines by name: ``(graph, cluster, decision) -> fusion bits``. ``inductor`` applies
only to graphs imported from PyTorch (it raises ValueError on others, and the best-heuristic
chain skips it there)."""
