"""The placement decoder: a list scheduler in the spirit of HEFT and m-ETF whose choices a network
steers, one op at a time, with the partial schedule as feedback.

HEFT (:mod:`graphopt.baselines.heft`) takes ops by decreasing upward rank and puts each on the
device with the earliest finish time (EFT, insertion-based). The decoder generalises it with four
per-op inputs, all optional (``None`` means zeros):

- ``shift`` ``(N,)``: the op's list priority is ``rank_u(i) + shift[i] * SHIFT_UNIT * R``, with
  ``R`` the largest upward rank (the critical path of mean costs). The next op is the **ready**
  op (all producers placed) of highest priority, ties by lower index, so any shift still yields a
  topological order. With zero shifts this is HEFT's order exactly: the upward rank never grows
  along an edge, so HEFT's global order is a ready order.
- ``affinity`` ``(N, D)``: device ``d`` is scored ``EFT(i, d) - affinity[i, d] *
  AFFINITY_UNIT * R`` and the op goes to the lowest score (ties: lower device). Device rows are
  the cluster's devices, so the same network runs on any device count.
- ``anchor`` ``(N,)`` and ``gate`` ``(N,)``: with an anchor placement (for instance the best
  heuristic's), op ``i`` stays on ``anchor[i]`` unless ``gate[i] > 0``; only the ops the network
  releases are placed by the score above, against the timeline the anchored ops have built so
  far. With zero gates the result is the anchor exactly; without an anchor every op is free.

Options: ``contention`` (the link-contention model of ``heft-lc``: transfers priced under the
cluster's link model, :attr:`Cluster.model <graphopt.hardware.Cluster.model>`), ``memory`` (a free op never
goes to a device whose resident parameters it would push past the device's memory; an anchored op
is not checked) and ``colocation`` (a free op of a colocation group goes where the group's first
placed op went). With all inputs zero, no anchor and these options off, the decoder returns
:func:`graphopt.baselines.heft.heft` (or ``heft_contention``) exactly; a test checks it against
both and against the plain twin in ``tests/graphopt/decoders/test_placement.py``.

Placement constraints (:mod:`graphopt.constraints`): a free op never goes to a device it may
not use (its score there is raised by :data:`graphopt.constraints.BARRED`), and the decoded placement is projected
onto the allowed devices (:meth:`~graphopt.constraints.Constraints.project`: an anchored op on
a barred device, or an enforced colocation group split by the loop, is moved). Without
constraints nothing changes.

Performance: the loop is HEFT's (:func:`graphopt.baselines.heft.list_schedule`, compiled with
numba); the ready list is a binary heap, so a step costs
``O(D * (in-degree + log N + max_gaps))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.baselines.heft import (
    DEFAULT_MAX_GAPS,
    list_inputs,
    run_list_schedule,
    schedule_links,
)
from graphopt.constraints import constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import FloatArray, IntArray, ListInputs

SHIFT_UNIT = 0.05
"""A priority shift of 1 moves an op by 5% of the critical path of mean costs."""
AFFINITY_UNIT = 0.01
"""An affinity of 1 is worth 1% of the critical path of mean costs in the device score."""


@dataclass(frozen=True)
class PlacementInputs:
    """What steers the placement decoder (module docstring); ``None`` means zeros / no anchor.

    Shapes: ``shift``, ``gate``, ``anchor`` ``(N,)``; ``affinity`` ``(N, D)``.
    """

    shift: FloatArray | None = None
    affinity: FloatArray | None = None
    gate: FloatArray | None = None
    anchor: IntArray | None = None


def _checked(name: str, value: object, shape: tuple[int, ...], graph: CompGraph) -> FloatArray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}; expected {shape} for {graph.name!r}")
    bad = ~np.isfinite(arr)
    if bad.any():
        op = int(np.flatnonzero(bad.reshape(len(arr), -1).any(axis=1))[0])
        raise ValueError(
            f"{name} of op {graph.op_names[op]!r} (index {op}) is {arr.reshape(len(arr), -1)[op]}; "
            "decoder inputs must be finite"
        )
    return np.ascontiguousarray(arr)


def colocation_groups(graph: CompGraph) -> tuple[IntArray, int]:
    """Colocation group index of each op (``-1`` for none) and the number of groups."""
    ids: dict[str, int] = {}
    group = np.array(
        [ids.setdefault(c, len(ids)) if c else -1 for c in graph.colocation], dtype=np.int64
    )
    return group.reshape(graph.num_ops), len(ids)


def decode_placement(
    graph: CompGraph,
    cluster: Cluster,
    inputs: PlacementInputs | None = None,
    *,
    contention: bool = False,
    memory: bool = False,
    colocation: bool = False,
    max_gaps: int = DEFAULT_MAX_GAPS,
    rank: FloatArray | None = None,
    groups: tuple[IntArray, int] | None = None,
    prologue: ListInputs | None = None,
) -> IntArray:
    """The decoded placement, one device index per op (module docstring).

    Args:
        graph: the graph.
        cluster: its devices and links.
        inputs: shift, affinity, gate and anchor; None: all zeros, no anchor (HEFT).
        contention: queue transfers on their links (``heft-lc``'s model).
        memory: free ops avoid devices their parameters would overflow.
        colocation: free ops follow their colocation group's first placed op.
        max_gaps: idle gaps examined per insertion search (HEFT's bound).
        rank: HEFT's upward rank, if already computed (:func:`~graphopt.baselines.heft.upward_rank`).
        groups: ``(group of each op, number of groups)``, ``-1`` for none: groups that move as
            colocation groups do (a free op goes where its group's first placed op went), in
            place of the graph's colocation groups (the joint search passes fused kernels).
        prologue: :func:`~graphopt.baselines.heft.list_inputs` of ``graph`` and ``cluster``, if
            already computed (a search decoding many times computes it once; ``rank`` is then
            unused).

    Raises:
        ValueError: an input of the wrong shape, a non-finite input (naming the op), an anchor
            device out of range, ``groups`` with ``colocation``, or placement constraints no
            placement can meet.
    """
    n, num_dev = graph.num_ops, cluster.num_devices
    inputs = inputs or PlacementInputs()
    prologue = prologue if prologue is not None else list_inputs(graph, cluster, rank=rank)
    rank = prologue.rank
    scale = float(rank.max()) if n else 0.0
    key = np.array(rank, dtype=np.float64)
    if inputs.shift is not None:
        key = key + _checked("shift", inputs.shift, (n,), graph) * (SHIFT_UNIT * scale)
    bias = None
    if inputs.affinity is not None:
        bias = _checked("affinity", inputs.affinity, (n, num_dev), graph) * (AFFINITY_UNIT * scale)
    anchor, free = None, None  # every op free
    if inputs.anchor is not None:
        anchor = np.asarray(inputs.anchor, dtype=np.int64).reshape(-1)
        if anchor.shape != (n,) or (n and (anchor.min() < 0 or anchor.max() >= num_dev)):
            raise ValueError(f"anchor must be {n} device indices in [0, {num_dev})")
        free = np.zeros(n, dtype=np.bool_)
        if inputs.gate is not None:
            free = _checked("gate", inputs.gate, (n,), graph) > 0.0
    if groups is not None and colocation:
        raise ValueError("give groups or colocation=True, not both")
    group, num_groups = colocation_groups(graph) if colocation else (None, 0)
    if groups is not None:
        group = np.ascontiguousarray(groups[0], dtype=np.int64)
        num_groups = int(groups[1])
        if group.shape != (n,) or (n and (group.min() < -1 or group.max() >= num_groups)):
            raise ValueError(f"groups must be {n} group indices in [-1, {num_groups})")
    mem = np.array([d.memory for d in cluster.devices], dtype=np.float64) if memory else None
    rules = constraints(graph, cluster)
    if rules.allowed is not None:
        bias = rules.barred_bias() if bias is None else bias + rules.barred_bias()
    placement, _, _, _ = run_list_schedule(
        key,
        prologue.comp,
        prologue.csr,
        schedule_links(cluster, prologue.links, contention),
        max_gaps=int(max_gaps),
        contention=contention,
        bias=bias,
        anchor=anchor,
        free=free,
        params=np.ascontiguousarray(graph.param_bytes, dtype=np.float64),
        memory=mem,
        group=group,
        num_groups=num_groups,
    )
    return rules.project(placement) if rules.active else placement
