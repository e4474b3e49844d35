"""Seeded random computation graphs: layered DAGs and series-parallel DAGs.

Both generators draw everything from ``numpy.random.default_rng(seed)``, so a ``(num_ops, seed)``
pair always gives the same graph (and different seeds give different graphs). Op costs are
plausible for one accelerator kernel:

=====================  ============================================================================
op kinds               compute (``MatMul``, ``Conv2D``, ``BatchMatMulV2``) 30%, elementwise
                       (``Relu``, ``AddV2``, ``Mul``, ``Tanh``, ``Sigmoid``, ``BiasAdd``) 50%, data
                       movement (``Reshape``, ``ConcatV2``, ``Transpose``, ``Slice``) 20%
``output_bytes``       log-uniform in [1 KiB, 32 MiB]
``flops``              compute: ``2 K`` per output element, ``K`` log-uniform in [16, 4096]
                       (a contraction depth); elementwise: 1-4 per output element; movement: 0
``param_bytes``        compute ops with probability ``param_prob``: log-uniform in [4 KiB, 16 MiB]
``bytes_accessed``     bytes of all inputs (edge bytes) + output + parameters
edge bytes             the producer's ``output_bytes``
=====================  ============================================================================

Graph names are ``random-layered-<n>-s<seed>`` and ``random-sp-<n>-s<seed>``; the registry
(:mod:`graphopt.workloads.registry`) builds any such name on demand.
"""

from __future__ import annotations

import numpy as np

from graphopt.graph import CompGraph

COMPUTE_TYPES = ("MatMul", "Conv2D", "BatchMatMulV2")
ELEMENTWISE_TYPES = ("Relu", "AddV2", "Mul", "Tanh", "Sigmoid", "BiasAdd")
MOVEMENT_TYPES = ("Reshape", "ConcatV2", "Transpose", "Slice")
KIB, MIB = 1024.0, 1024.0 * 1024.0


def layered_dag(
    num_ops: int,
    seed: int,
    *,
    width: int | None = None,
    max_inputs: int = 3,
    skip_prob: float = 0.1,
    param_prob: float = 0.5,
    name: str | None = None,
) -> CompGraph:
    """A DAG of consecutive layers; each op reads 1..``max_inputs`` ops of the previous layer, or
    with probability ``skip_prob`` per input of any earlier layer (a skip connection). Every op
    outside the last layer feeds at least one op of the next layer.

    Args:
        num_ops: number of ops (>= 2).
        seed: random seed.
        width: mean layer width (default ``round(sqrt(num_ops))``); widths are uniform in
            ``[1, 2 width - 1]``.
        max_inputs: most inputs per op.
        skip_prob: probability that an input comes from an earlier layer than the previous one.
        param_prob: probability that a compute op holds parameters.
        name: graph name (default ``random-layered-<num_ops>-s<seed>``).

    Raises:
        ValueError: ``num_ops < 2``, ``max_inputs < 1`` or a probability outside ``[0, 1]``.
    """
    _check(num_ops, max_inputs, skip_prob, param_prob)
    rng = np.random.default_rng(seed)
    width = width or max(1, round(num_ops**0.5))
    sizes: list[int] = []
    while sum(sizes) < num_ops:
        sizes.append(int(rng.integers(1, 2 * width)))
    sizes[-1] -= sum(sizes) - num_ops
    starts = np.cumsum([0, *sizes])
    src: list[int] = []
    dst: list[int] = []
    has_consumer = np.zeros(num_ops, dtype=bool)
    for k in range(1, len(sizes)):
        lo, hi = int(starts[k - 1]), int(starts[k])
        for op in range(hi, int(starts[k + 1])):
            chosen = {int(rng.integers(lo, hi))}
            for _ in range(int(rng.integers(1, max_inputs + 1)) - 1):
                if k > 1 and rng.random() < skip_prob:
                    chosen.add(int(rng.integers(0, lo)))
                else:
                    chosen.add(int(rng.integers(lo, hi)))
            for p in sorted(chosen):
                src.append(p)
                dst.append(op)
                has_consumer[p] = True
        # every op of the previous layer feeds some op of this layer
        for p in range(lo, hi):
            if not has_consumer[p]:
                c = int(rng.integers(hi, int(starts[k + 1])))
                src.append(p)
                dst.append(c)
                has_consumer[p] = True
    layer = np.repeat(np.arange(len(sizes)), sizes)
    return _finish(
        name or f"random-layered-{num_ops}-s{seed}",
        rng,
        num_ops,
        src,
        dst,
        param_prob,
        [f"layer_{k}" for k in layer.tolist()],
        {"family": "random-layered", "num_ops": num_ops, "seed": seed, "width": width},
    )


def series_parallel_dag(
    num_ops: int,
    seed: int,
    *,
    series_prob: float = 0.6,
    param_prob: float = 0.5,
    name: str | None = None,
) -> CompGraph:
    """A two-terminal series-parallel DAG grown from one edge ``source -> sink``: each new op
    either subdivides a random edge ``u -> v`` into ``u -> w -> v`` (series, probability
    ``series_prob``) or adds a parallel path ``u -> w -> v`` beside it.

    Args:
        num_ops: number of ops (>= 2).
        seed: random seed.
        series_prob: probability of a series step.
        param_prob: probability that a compute op holds parameters.
        name: graph name (default ``random-sp-<num_ops>-s<seed>``).

    Raises:
        ValueError: ``num_ops < 2`` or a probability outside ``[0, 1]``.
    """
    _check(num_ops, 1, series_prob, param_prob)
    rng = np.random.default_rng(seed)
    src, dst = [0], [1]
    for w in range(2, num_ops):
        e = int(rng.integers(0, len(src)))
        u, v = src[e], dst[e]
        if rng.random() < series_prob:
            dst[e] = w
        else:
            src.append(u)
            dst.append(w)
        src.append(w)
        dst.append(v)
    return _finish(
        name or f"random-sp-{num_ops}-s{seed}",
        rng,
        num_ops,
        src,
        dst,
        param_prob,
        None,
        {"family": "random-sp", "num_ops": num_ops, "seed": seed},
    )


def _check(num_ops: int, max_inputs: int, p1: float, p2: float) -> None:
    if isinstance(num_ops, bool) or not isinstance(num_ops, int) or num_ops < 2:
        raise ValueError(f"num_ops must be an integer >= 2, got {num_ops!r}")
    if max_inputs < 1:
        raise ValueError(f"max_inputs must be >= 1, got {max_inputs}")
    for p in (p1, p2):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"probabilities must lie in [0, 1], got {p}")


def _log_uniform(rng: np.random.Generator, lo: float, hi: float, n: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


def _finish(
    name: str,
    rng: np.random.Generator,
    n: int,
    src: list[int],
    dst: list[int],
    param_prob: float,
    layer: list[str] | None,
    metadata: dict,
) -> CompGraph:
    """Draw op types and costs (module docstring) and build the graph."""
    kind = rng.choice(3, size=n, p=[0.3, 0.5, 0.2])
    pick = rng.integers(0, 12, size=n)
    groups = (COMPUTE_TYPES, ELEMENTWISE_TYPES, MOVEMENT_TYPES)
    types = [
        groups[k][p % len(groups[k])] for k, p in zip(kind.tolist(), pick.tolist(), strict=True)
    ]
    out_bytes = np.round(_log_uniform(rng, KIB, 32 * MIB, n) / 4) * 4
    elems = out_bytes / 4
    depth = _log_uniform(rng, 16, 4096, n)
    per_elem = rng.integers(1, 5, size=n)
    flops = np.where(kind == 0, 2 * depth * elems, np.where(kind == 1, per_elem * elems, 0.0))
    has_params = (kind == 0) & (rng.random(n) < param_prob)
    params = np.where(has_params, np.round(_log_uniform(rng, 4 * KIB, 16 * MIB, n) / 4) * 4, 0.0)
    src_a, dst_a = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    edge_bytes = out_bytes[src_a]
    read = np.bincount(dst_a, weights=edge_bytes, minlength=n)
    return CompGraph.from_arrays(
        name=name,
        op_names=[f"{t}_{i}" for i, t in enumerate(types)],
        op_types=types,
        flops=np.round(flops),
        bytes_accessed=read + out_bytes + params,
        output_bytes=out_bytes,
        param_bytes=params,
        edge_src=src,
        edge_dst=dst,
        edge_bytes=edge_bytes,
        layer=layer,
        metadata=metadata,
    )
