"""Fusion baselines: no fusion, an XLA-like rule set, and simulator-guided greedy fusion.

Each fuser takes ``(graph, cluster, decision)`` and returns ``int64`` fusion bits, one per op in
topological order, for the decision's placement and priorities (:data:`FUSERS`). The semantics are
the simulator's (:mod:`graphopt.sim`, rules 1-2): an op whose bit is 1 is merged with *every* one of
its consumers; a kernel runs on its root's (highest-index member's) device; a fusion whose
contracted kernel graph has a cycle is illegal.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.typing import Decision, IntArray

Fuser = Callable[[CompGraph, Cluster, Decision], IntArray]
"""A fusion heuristic: ``(graph, cluster, decision) -> fusion bits`` for the decision's placement
and priorities."""

_UNARY = (
    # TensorFlow
    "Relu",
    "Relu6",
    "Elu",
    "Selu",
    "LeakyRelu",
    "Softplus",
    "Sigmoid",
    "Tanh",
    "Exp",
    "Log",
    "Log1p",
    "Expm1",
    "Sqrt",
    "Rsqrt",
    "Square",
    "Reciprocal",
    "Neg",
    "Abs",
    "Sign",
    "Floor",
    "Ceil",
    "Round",
    "Sin",
    "Cos",
    "Erf",
    "Cast",
    "Identity",
    "StopGradient",
    "ZerosLike",
    "OnesLike",
    # PipeDream / torch.nn module classes
    "ReLU",
    "ReLU6",
    "LeakyReLU",
    "ELU",
    "GELU",
    "SiLU",
    "Hardtanh",
    "Dropout",
    # ATen (torch importer)
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "neg",
    "abs",
    "clone",
    "native_dropout",
    "hardtanh",
    "leaky_relu",
    "elu",
)
_BINARY = (
    # TensorFlow
    "Add",
    "AddV2",
    "AddN",
    "Sub",
    "Mul",
    "Div",
    "RealDiv",
    "Maximum",
    "Minimum",
    "Pow",
    "SquaredDifference",
    "BiasAdd",
    "Select",
    "SelectV2",
    # gradients of elementwise ops (TensorFlow)
    "SigmoidGrad",
    "TanhGrad",
    "ReluGrad",
    "Relu6Grad",
    "EluGrad",
    "RsqrtGrad",
    "SqrtGrad",
    # PipeDream / torch.nn
    "Mul",
    "Add",
    # ATen
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "where",
    "maximum",
    "minimum",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
    "gelu_backward",
    "silu_backward",
    "native_dropout_backward",
)

ELEMENTWISE_TYPES: frozenset[str] = frozenset(_UNARY + _BINARY) | frozenset(
    f"{t}Backward"
    for t in (
        "ReLU",
        "ReLU6",
        "LeakyReLU",
        "ELU",
        "GELU",
        "SiLU",
        "Hardtanh",
        "Dropout",
        "Sigmoid",
        "Tanh",
        "Add",
        "Mul",
    )
)
"""Op types the "xla" fuser treats as elementwise (TensorFlow, PipeDream module and ATen names;
PipeDream's backward ops are ``<type>Backward``)."""

REDUCTION_TYPES: frozenset[str] = frozenset(
    (
        # TensorFlow
        "Sum",
        "Mean",
        "Max",
        "Min",
        "Prod",
        "BiasAddGrad",
        "Softmax",
        "LogSoftmax",
        "FusedBatchNormV3",
        "LayerNorm",
        # PipeDream / torch.nn
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "Softmax",
        "LogSoftmax",
        # ATen
        "sum",
        "mean",
        "amax",
        "amin",
        "_softmax",
        "_log_softmax",
        "native_layer_norm",
        "native_batch_norm",
        "_native_batch_norm_legit_functional",
        "var_mean",
    )
) | frozenset(
    f"{t}Backward"
    for t in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "Softmax", "LogSoftmax")
)
"""Op types the "xla" fuser treats as reductions (normalisations and softmax reduce, then map)."""

FUSIBLE_TYPES: frozenset[str] = ELEMENTWISE_TYPES | REDUCTION_TYPES

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
    fusible_types: frozenset[str] = FUSIBLE_TYPES,
) -> IntArray:
    """XLA-like default fusion: elementwise and reduction consumers fused into their producers.

    Rule: op ``u`` gets bit 1 when

    1. ``u`` has **exactly one** consumer ``v`` (no duplication of multi-consumer producers: in
       our semantics a bit merges ``u`` with *all* its consumers, and XLA would instead duplicate
       ``u`` into each of them, which the simulator cannot express);
    2. ``v``'s op type is in ``fusible_types`` (by default :data:`ELEMENTWISE_TYPES` and
       :data:`REDUCTION_TYPES`); ``u`` may be of any type (so ``MatMul -> BiasAdd -> Relu``
       becomes one kernel, as XLA's output fusion does);
    3. ``u`` and ``v`` are on the same device in ``decision.placement`` (so that fusion never
       silently moves an op: a kernel runs on its root's device);
    4. the merged kernel has at most ``max_kernel_ops`` ops (ops are visited in topological order
       and a merge that would exceed the cap is skipped; XLA bounds fusion size likewise).

    Legality (always legal, for any graph and placement). Every op with bit 1 has exactly one
    consumer, so each fused edge is the *only* out-edge of its producer and each kernel is an
    in-tree whose root is its only member with out-edges leaving the kernel: a member ``m`` other
    than the root has bit 1, and its single consumer is in the kernel. So every edge between two
    kernels ``K -> K'`` leaves from ``root(K)`` and enters some member ``w`` of ``K'``, hence
    ``root(K) < w <= root(K')`` in topological index. Root indices strictly increase along every
    path of the contracted graph, which therefore has no cycle. (This holds for *any* subset of the
    single-consumer ops, so rules 2-4 are only about profitability.)

    Args:
        graph: the computation graph.
        cluster: the devices (unused; part of the fuser signature).
        decision: its placement is read (``None``: all on device 0).
        max_kernel_ops: most ops in one fused kernel (>= 1; 1 disables fusion).
        fusible_types: consumer op types that may be fused into their producer.

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
    single = np.flatnonzero(np.diff(indptr) == 1)
    if len(single) == 0:
        return bits
    consumer = dst[indptr[single]]
    ok = placement[single] == placement[consumer]
    ok &= np.array([graph.op_types[v] in fusible_types for v in consumer.tolist()], dtype=bool)
    # Union-find with sizes; ops visited in topological order (single is ascending).
    parent = np.arange(n)
    size = np.ones(n, dtype=np.int64)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    for u, v in zip(single[ok].tolist(), consumer[ok].tolist(), strict=True):
        a, b = find(u), find(v)
        if size[a] + size[b] > max_kernel_ops:
            continue
        parent[a] = b
        size[b] += size[a]
        bits[u] = 1
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

    Starting from the ``start`` fuser's bits, the candidates are the ops with bit 0 and at least one
    consumer, visited in topological order in batches of ``batch_size``; each candidate's flip
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
    has_consumer = np.diff(graph.successors_csr[0]) > 0
    improved = True
    while improved and used < budget:
        improved = False
        candidates = np.flatnonzero((bits == 0) & has_consumer)
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
}
"""Fusion baselines by name: ``(graph, cluster, decision) -> fusion bits``."""
