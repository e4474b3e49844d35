"""The fusion legality rules: which groups of ops a compiler could run as one kernel.

Kernels are formed as in the simulator's rule 1 (an op whose fusion bit is 1 is merged with every
one of its consumers). A kernel of two or more ops is legal when (rules 2a-2d of
:mod:`graphopt.sim`; modelled on XLA's GPU fusion, ``gpu_fusible.cc`` / ``instruction_fusion.cc``,
and on PyTorch Inductor's scheduler):

a. **Fusible classes.** No member is ``opaque`` or a ``source`` (:mod:`graphopt.op_classes`):
   a custom call, a collective or a parameter is never part of a fused kernel.
b. **Heroes.** A ``contraction`` shares its kernel with no other contraction or reduction, and
   its other members are ``elementwise`` (XLA's output fusion of a gemm with its bias and
   activation; a library gemm or convolution reads and writes plain layouts, so a transpose, slice
   or pad next to it stays a kernel of its own). ``reduction`` ops may share a kernel with each
   other and with ``elementwise`` and ``data_movement`` ops (XLA's input and multi-output
   fusions, Inductor's reduction nodes: the mean and variance of a layer norm, the max and sum of
   a softmax, the two row sums of a layer norm's backward are one kernel in Inductor).
c. **One device.** Every member is placed on the device of the kernel's root (its highest-index
   member): fusion never crosses devices.
d. **Bounded parameters.** The kernel's distinct inputs (producers outside the kernel) plus its
   outputs (members read outside the kernel, or read by nobody) number at most
   :data:`MAX_KERNEL_IO` (XLA's ``kMaxOperandsAndOutputsPerFusion`` is 96).

The acyclicity of the kernel graph (rule 2e) is checked by the event loop itself
(:mod:`graphopt.sim.engine`). :func:`first_violation` is compiled with ``numba``; its plain twin
is ``tests/graphopt/sim/reference.py::fusion_violation``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from graphopt.graph import CompGraph
from graphopt.op_classes import CONTRACTION, DATA_MOVEMENT, HEROES, NEVER_FUSED, OP_CLASSES
from graphopt.typing import IntArray

MAX_KERNEL_IO = 96
"""Most distinct inputs plus outputs of one fused kernel (rule d)."""

RULE_OK, RULE_CLASS, RULE_HEROES, RULE_DEVICE, RULE_IO, RULE_LAYOUT = 0, 1, 2, 3, 4, 5
"""Codes of :func:`first_violation`: no violation, rules a, b (two heroes), c, d, and b (data
movement in a contraction's kernel)."""

_NEVER = np.array([c in NEVER_FUSED for c in OP_CLASSES], dtype=np.bool_)
_HERO = np.array([c in HEROES for c in OP_CLASSES], dtype=np.bool_)
_CONTRACTION = np.array([c == CONTRACTION for c in OP_CLASSES], dtype=np.bool_)
_MOVEMENT = np.array([c == DATA_MOVEMENT for c in OP_CLASSES], dtype=np.bool_)


def class_codes(graph: CompGraph) -> IntArray:
    """``(N,)`` int64: each op's class as its index in :data:`graphopt.op_classes.OP_CLASSES`."""
    code = {c: i for i, c in enumerate(OP_CLASSES)}
    return np.array([code[c] for c in graph.op_classes], dtype=np.int64)


@njit(cache=True, inline="always")
def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@njit(cache=True)
def first_violation(
    succ_ptr,
    succ_dst,
    pred_ptr,
    pred_src,
    never,
    hero,
    contraction,
    movement,
    fusion,
    placement,
    max_io,
):
    """``(rule, op_a, op_b)``: the first rule broken; ``(RULE_OK, -1, -1)`` when every kernel is
    legal. Order: rules a, b (two heroes) and c over the members of fused kernels in topological
    order; then b (a data-movement member, ``op_a``, in the kernel of contraction ``op_b``) in the
    same order; then d over the kernels in root order.

    ``op_a`` / ``op_b``: rule a, the op of a never-fused class (``-1``); rule b, the first and the
    second hero; rule c, the member on another device and the root; rule d, the root and the
    kernel's input + output count. ``never``, ``hero``, ``contraction``, ``movement`` are ``(N,)``
    bools per op.
    """
    n = len(fusion)
    parent = np.arange(n)
    for u in range(n):
        if fusion[u] == 1:
            for j in range(succ_ptr[u], succ_ptr[u + 1]):
                a, b = _find(parent, u), _find(parent, succ_dst[j])
                if a != b:  # the larger index becomes the representative: it is the root
                    if a < b:
                        parent[a] = b
                    else:
                        parent[b] = a
    root = np.empty(n, np.int64)
    size = np.zeros(n, np.int64)
    for v in range(n):
        root[v] = _find(parent, v)
        size[root[v]] += 1
    first_hero = np.full(n, -1, np.int64)
    for v in range(n):  # rules a-c, members in topological order
        r = root[v]
        if size[r] < 2:
            continue
        if never[v]:
            return 1, v, -1
        if hero[v]:  # a contraction shares its kernel with no other hero; reductions may
            if first_hero[r] >= 0 and (contraction[v] or contraction[first_hero[r]]):
                return 2, first_hero[r], v
            if first_hero[r] < 0:
                first_hero[r] = v
        if placement[v] != placement[r]:
            return 3, v, r
    for v in range(n):  # rule b: a contraction's partners are elementwise
        r = root[v]
        if size[r] >= 2 and movement[v] and first_hero[r] >= 0 and contraction[first_hero[r]]:
            return 5, v, first_hero[r]
    pairs = np.empty(len(pred_src), np.int64)  # (kernel, outside producer) as r * n + p
    m = 0
    io = np.zeros(n, np.int64)
    for v in range(n):  # rule d
        r = root[v]
        if size[r] < 2:
            continue
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            p = pred_src[j]
            if root[p] != r:
                pairs[m] = r * n + p
                m += 1
        leaves = succ_ptr[v] == succ_ptr[v + 1]
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            if root[succ_dst[j]] != r:
                leaves = True
                break
        if leaves:
            io[r] += 1
    pairs = np.sort(pairs[:m])
    for i in range(m):  # each distinct producer once per kernel
        if i == 0 or pairs[i] != pairs[i - 1]:
            io[pairs[i] // n] += 1
    for r in range(n):
        if io[r] > max_io:
            return 4, r, io[r]
    return 0, -1, -1


class FusionRules:
    """Rules a-d for one graph: the per-op arrays prepared once.

    Args:
        graph: the graph whose fusion bits are checked.
        max_io: the input + output bound of rule d.
    """

    def __init__(self, graph: CompGraph, max_io: int = MAX_KERNEL_IO) -> None:
        self.graph = graph
        self.max_io = int(max_io)
        codes = class_codes(graph)
        self.never = _NEVER[codes]
        self.hero = _HERO[codes]
        self.contraction = _CONTRACTION[codes]
        self.movement = _MOVEMENT[codes]
        self.succ_ptr, self.succ_dst = graph.successors_csr
        self.pred_ptr, self.pred_src, _ = graph.predecessors_csr

    def violation(self, placement: IntArray, fusion: IntArray) -> tuple[int, int, int]:
        """``(rule, op_a, op_b)`` of :func:`first_violation` for one decision."""
        rule, a, b = first_violation(
            self.succ_ptr,
            self.succ_dst,
            self.pred_ptr,
            self.pred_src,
            self.never,
            self.hero,
            self.contraction,
            self.movement,
            np.ascontiguousarray(fusion, dtype=np.int64),
            np.ascontiguousarray(placement, dtype=np.int64),
            self.max_io,
        )
        return int(rule), int(a), int(b)

    def violations(self, placements: IntArray, fusions: IntArray) -> IntArray:
        """``(B,)`` rule codes for ``(B, N)`` placements and fusion bits (0: legal)."""
        return np.array(
            [self.violation(p, f)[0] for p, f in zip(placements, fusions, strict=True)],
            dtype=np.int64,
        )

    def describe(self, rule: int, a: int, b: int) -> str:
        """The reason of an illegal decision: which rule, which ops, how to fix it."""
        g = self.graph
        name = g.op_names
        if rule == RULE_CLASS:
            return (
                f"illegal fusion (rule 2a): op {name[a]!r} ({g.op_types[a]}) is "
                f"{g.op_classes[a]} and never fuses; unset its fusion bit and those of its producers"
            )
        if rule == RULE_HEROES:
            return (
                f"illegal fusion (rule 2b): ops {name[a]!r} ({g.op_classes[a]}) and {name[b]!r} "
                f"({g.op_classes[b]}) would share one kernel, and a contraction shares its kernel "
                "with no other contraction or reduction; unset a fusion bit on the path between them"
            )
        if rule == RULE_LAYOUT:
            return (
                f"illegal fusion (rule 2b): op {name[a]!r} ({g.op_types[a]}) is data movement in "
                f"the kernel of the contraction {name[b]!r}, which fuses only elementwise ops; "
                "unset the fusion bit between them"
            )
        if rule == RULE_DEVICE:
            return (
                f"illegal fusion (rule 2c): op {name[a]!r} is fused into the kernel of "
                f"{name[b]!r} on another device; fusion never crosses devices"
            )
        if rule == RULE_IO:
            return (
                f"illegal fusion (rule 2d): the kernel of {name[a]!r} has {b} inputs plus outputs, "
                f"more than {self.max_io}; fuse fewer ops into it"
            )
        raise AssertionError(f"no violation to describe (rule {rule})")


def fusion_mask(graph: CompGraph) -> IntArray:
    """``(N,)`` int8: 1 where an op's fusion bit may be set, 0 where setting it alone already
    breaks rule a or b (whatever the other bits and the placement): the op has no consumer, is
    opaque or a source, has an opaque or source consumer, is a contraction with a contraction,
    reduction or data-movement consumer, or a reduction or data movement with a contraction
    consumer.
    Unmasked bits can still break the rules together (two heroes joined through an elementwise
    op), on different devices, or by their kernel's size."""
    codes = class_codes(graph)
    never, hero = _NEVER[codes], _HERO[codes]
    succ_ptr, succ_dst = graph.successors_csr
    owner = np.repeat(np.arange(graph.num_ops), np.diff(succ_ptr))
    contraction, movement = _CONTRACTION[codes], _MOVEMENT[codes]
    bad = never[succ_dst] | (
        hero[owner] & hero[succ_dst] & (contraction[owner] | contraction[succ_dst])
    )
    bad |= (contraction[owner] & movement[succ_dst]) | (movement[owner] & contraction[succ_dst])
    blocked = np.zeros(graph.num_ops, dtype=bool)
    np.logical_or.at(blocked, owner, bad)
    ok = (np.diff(succ_ptr) > 0) & ~never & ~blocked
    return ok.astype(np.int8)
