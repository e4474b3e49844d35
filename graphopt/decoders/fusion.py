"""The fusion decoder: learned per-op scores steer a fusion pass under the fusion rules.

Two ways, both legal for any scores and equal to their heuristic for zero scores:

- **Without an anchor**: the XLA-like fuser's pass (:func:`graphopt.baselines.fusion.xla_fusion`)
  with the scores deciding the order in which producers are fused into their consumer (by
  decreasing score, ties by topological index) and which are vetoed (score below :data:`VETO`).
  The pass keeps every fusion rule whatever the order (each fused op has one consumer, so every
  kernel is an in-tree). Zero scores: the ``xla`` fuser exactly.
- **With an anchor** (the reference's bits, e.g. simulator-guided greedy fusion): the anchor's bits
  with the vetoed ones unset, and the ops scoring above :data:`ADD` that the XLA pass would fuse
  set. If the result breaks a rule (:mod:`graphopt.sim.fusion_rules`, acyclicity included, checked
  here without simulating), the anchor is returned unchanged; an anchor that itself breaks a rule
  for this placement (a placement decoded after it) falls back to the pass without an anchor.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.baselines.fusion import xla_fusion
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.engine import build_kernels
from graphopt.sim.fusion_rules import RULE_OK, FusionRules
from graphopt.typing import Decision, FloatArray, IntArray

VETO = -1.0
"""Scores below this keep the op out of any fusion."""
ADD = 1.0
"""With an anchor, scores above this add the op's fusion where the XLA pass would make it."""


@njit(cache=True)
def _kernel_graph_acyclic(kernel_of, num_kernels, edge_src, edge_dst):
    """Kahn's algorithm on the contracted graph (edges between different kernels)."""
    indeg = np.zeros(num_kernels, dtype=np.int64)
    count = np.zeros(num_kernels + 1, dtype=np.int64)
    for e in range(len(edge_src)):
        a, b = kernel_of[edge_src[e]], kernel_of[edge_dst[e]]
        if a != b:
            indeg[b] += 1
            count[a + 1] += 1
    for k in range(num_kernels):
        count[k + 1] += count[k]
    out = np.empty(count[num_kernels], dtype=np.int64)
    fill = count[:-1].copy()
    for e in range(len(edge_src)):
        a, b = kernel_of[edge_src[e]], kernel_of[edge_dst[e]]
        if a != b:
            out[fill[a]] = b
            fill[a] += 1
    stack = np.empty(num_kernels, dtype=np.int64)
    top = 0
    for k in range(num_kernels):
        if indeg[k] == 0:
            stack[top] = k
            top += 1
    seen = 0
    while top > 0:
        top -= 1
        k = stack[top]
        seen += 1
        for j in range(count[k], count[k + 1]):
            b = out[j]
            indeg[b] -= 1
            if indeg[b] == 0:
                stack[top] = b
                top += 1
    return seen == num_kernels


def is_legal(graph: CompGraph, placement: IntArray, bits: IntArray) -> bool:
    """Whether ``bits`` keep every fusion rule for ``placement``, acyclicity (rule 2e) included."""
    if FusionRules(graph).violation(placement, bits)[0] != RULE_OK:
        return False
    return is_acyclic(graph, bits)


def is_acyclic(graph: CompGraph, bits: IntArray) -> bool:
    """Whether the kernels ``bits`` form leave the kernel graph acyclic (rule 2e)."""
    succ_ptr, succ_dst = graph.successors_csr
    op_int = np.zeros((6, graph.num_ops + 1), dtype=np.int32)
    # the simulator's types (int32 CSR, writable int64 bits): build_kernels compiled once for both
    kernel_of, roots, _, _ = build_kernels(
        succ_ptr.astype(np.int32), succ_dst.astype(np.int32), np.array(bits, dtype=np.int64), op_int
    )
    return bool(_kernel_graph_acyclic(kernel_of, len(roots), graph.edge_src, graph.edge_dst))


def decode_fusion(
    graph: CompGraph,
    cluster: Cluster,
    decision: Decision,
    score: FloatArray | None = None,
    anchor: IntArray | None = None,
) -> IntArray:
    """Fusion bits ``(N,)`` for ``decision``'s placement, steered by ``score`` ``(N,)`` from the
    ``anchor`` bits when given (module docstring).

    Raises:
        ValueError: a score of the wrong shape or not finite (naming the op).
    """
    n = graph.num_ops
    placement = np.zeros(n, np.int64) if decision.placement is None else decision.placement
    if anchor is not None:
        anchor = np.asarray(anchor, dtype=np.int64)
        if not is_legal(graph, placement, anchor):
            anchor = None
    if score is None:
        return xla_fusion(graph, cluster, decision) if anchor is None else anchor.copy()
    s = np.asarray(score, dtype=np.float64)
    if s.shape != (graph.num_ops,):
        raise ValueError(f"fusion score has shape {s.shape}; expected ({graph.num_ops},)")
    bad = np.flatnonzero(~np.isfinite(s))
    if len(bad):
        op = int(bad[0])
        raise ValueError(f"fusion score of op {graph.op_names[op]!r} is {s[op]}; it must be finite")
    if anchor is None:
        order = np.lexsort((np.arange(len(s)), -s))
        return xla_fusion(graph, cluster, decision, visit=order[s[order] >= VETO])
    bits = anchor.copy()
    bits[s < VETO] = 0
    add = (s > ADD) & (anchor == 0)
    if add.any():
        bits[add & (xla_fusion(graph, cluster, decision) == 1)] = 1
    if np.array_equal(bits, anchor) or is_legal(graph, placement, bits):
        return bits
    return anchor.copy()
