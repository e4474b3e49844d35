"""The "inductor" fuser: the kernels PyTorch Inductor forms, as fusion bits.

For a graph imported from the PyTorch zoo (``torch:NAME?...``, :mod:`graphopt.importers.zoo`),
:func:`inductor_fusion` rebuilds the model from ``graph.metadata`` (``zoo``, ``zoo_args``,
``training``), has Inductor lower and schedule it (no code generation; see
:mod:`graphopt.importers.inductor`: 5-25 s per zoo graph at realistic sizes on two CPU cores,
cached per graph fingerprint for the process) and turns Inductor's kernels into fusion bits.

Groups to bits (the simulator's rule 1: an op whose bit is 1 is merged with *every* one of its
consumers): op ``u`` of a group of two or more ops gets bit 1 when it has a consumer and **all** its
consumers are in the same group and on ``u``'s device in ``decision.placement`` (rule 2c). A member
read outside its group keeps bit 0 (its bit would pull the outside readers in), so the edges from
it to the other members are not expressed: the group may fall apart into several kernels, never
into a larger one. Each kernel the bits form is thus a subset of one Inductor kernel (two such
subsets of one Inductor kernel could still depend on each other in a cycle, rule 2e; none does on
the zoo). :func:`inductor_bits` returns the counts of expressed and unexpressed edges.

The bits are Inductor's choices, not repaired: by default the fuser does not check them against
:mod:`graphopt.sim.fusion_rules` (the tests do: every fusion Inductor makes on the zoo models must
be legal, and where one is not, the rule is questioned). ``legal_only=True`` (or
:func:`drop_illegal`) splits every kernel that breaks a rule, or sits on a cycle of the kernel
graph, back into single ops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from cachetools import LRUCache

from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.fusion_rules import FusionRules
from graphopt.typing import Decision, IntArray

if TYPE_CHECKING:
    from graphopt.importers.inductor import InductorGroups

_CACHE: LRUCache[str, InductorGroups] = LRUCache(maxsize=16)


def inductor_fusion(
    graph: CompGraph, cluster: Cluster, decision: Decision, *, legal_only: bool = False
) -> IntArray:
    """Fusion bits of Inductor's kernels for ``graph`` (see the module docstring).

    Args:
        graph: a graph imported from the PyTorch zoo (its metadata names the model).
        cluster: the devices (unused; part of the fuser signature).
        decision: its placement is read (``None``: all on device 0).
        legal_only: split the kernels that break a fusion rule back into single ops
            (:func:`drop_illegal`).

    Raises:
        ValueError: the graph was not imported from the zoo, or Inductor failed on it.
        ImportError: torch (or, for Hugging Face models, transformers) is not installed.
    """
    bits, _ = inductor_bits(graph, decision)
    if legal_only:
        bits, _ = drop_illegal(graph, bits, decision.placement)
    return bits


def graph_groups(graph: CompGraph) -> InductorGroups:
    """Inductor's groups for ``graph``, computed once per graph fingerprint (16 kept)."""
    key = graph.fingerprint
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    spec, training = zoo_spec(graph)
    from graphopt.importers.inductor import zoo_inductor_groups

    groups = zoo_inductor_groups(spec, training=training)
    _CACHE[key] = groups
    return groups


def zoo_spec(graph: CompGraph) -> tuple[str, bool]:
    """``(torch:NAME?..., training)`` of a zoo graph, from its metadata.

    Raises:
        ValueError: the graph was not imported from the zoo.
    """
    meta = graph.metadata or {}
    name, args = meta.get("zoo"), meta.get("zoo_args")
    if (
        meta.get("source") != "torch.export"
        or not isinstance(name, str)
        or not isinstance(args, dict)
    ):
        raise ValueError(
            "the inductor fuser needs a graph imported from PyTorch (torch:NAME); "
            f"{graph.name!r} was not"
        )
    from graphopt.importers.zoo import ZOO, canonical_spec

    if name not in ZOO:
        raise ValueError(
            "the inductor fuser needs a graph imported from PyTorch (torch:NAME); "
            f"{graph.name!r} names the unknown zoo model {name!r}"
        )
    return canonical_spec(name, {k: int(v) for k, v in args.items()}), bool(meta.get("training"))


def inductor_bits(
    graph: CompGraph, decision: Decision | None = None
) -> tuple[IntArray, dict[str, Any]]:
    """Fusion bits of Inductor's kernels and what the mapping kept.

    Returns:
        ``(bits, stats)``: ``stats`` holds the :meth:`InductorGroups.summary` counts plus
        ``intra_group_edges`` (edges inside an Inductor kernel), ``expressed_edges`` (those the
        bits merge), ``unexpressed_edges`` (the rest: their producer is read outside the kernel,
        or the two ops are on different devices) and ``missing_ops`` (group members that are not
        ops of ``graph``: the graph was imported by another torch version).
    """
    groups = graph_groups(graph)
    bits, stats = groups_to_bits(graph, groups.groups, decision)
    return bits, {**groups.summary(), **stats}


def groups_to_bits(
    graph: CompGraph, groups: list[list[str]], decision: Decision | None = None
) -> tuple[IntArray, dict[str, int]]:
    """Fusion bits expressing ``groups`` (lists of op names) as far as rule 1 allows (see the
    module docstring), and the edge counts of :func:`inductor_bits`."""
    n = graph.num_ops
    index = {name: i for i, name in enumerate(graph.op_names)}
    group = np.full(n, -1, dtype=np.int64)
    missing = 0
    for g, members in enumerate(groups):
        if len(members) < 2:
            continue
        for name in members:
            i = index.get(name)
            if i is None:
                missing += 1
            else:
                group[i] = g
    placement = (
        np.zeros(n, dtype=np.int64)
        if decision is None or decision.placement is None
        else np.asarray(decision.placement, dtype=np.int64)
    )
    src, dst = graph.edge_src, graph.edge_dst
    inside = (group[src] >= 0) & (group[src] == group[dst])
    ok = inside & (placement[src] == placement[dst])
    # u keeps bit 1 only when every out-edge of u is an ok edge (and it has one)
    out_degree = np.bincount(src, minlength=n)
    ok_degree = np.bincount(src[ok], minlength=n)
    bits = ((out_degree > 0) & (ok_degree == out_degree)).astype(np.int64)
    expressed = int(np.sum(bits[src] & inside))
    return bits, {
        "intra_group_edges": int(inside.sum()),
        "expressed_edges": expressed,
        "unexpressed_edges": int(inside.sum()) - expressed,
        "missing_ops": missing,
    }


def drop_illegal(
    graph: CompGraph, bits: IntArray, placement: IntArray | None = None
) -> tuple[IntArray, list[tuple[int, int, int]]]:
    """``bits`` with every kernel that breaks a rule of :mod:`graphopt.sim.fusion_rules`, or lies
    on a cycle of the contracted kernel graph (rule 2e), split back into single ops (its members'
    bits unset), and the violations found: ``(rule, op_a, op_b)`` as
    :meth:`FusionRules.violation` gives them, ``(-1, root, -1)`` for a kernel on a cycle."""
    n = graph.num_ops
    bits = np.array(bits, dtype=np.int64)
    where = np.zeros(n, dtype=np.int64) if placement is None else np.asarray(placement, np.int64)
    rules = FusionRules(graph)
    found: list[tuple[int, int, int]] = []
    while True:
        rule, a, b = rules.violation(where, bits)
        if rule != 0:
            found.append((rule, a, b))
            roots = _kernel_of(graph, bits)
            bits[roots == roots[a]] = 0
            continue
        cyclic = _cyclic_kernels(graph, bits)
        if not cyclic:
            return bits, found
        roots = _kernel_of(graph, bits)
        for root in cyclic:
            found.append((-1, root, -1))
            bits[roots == root] = 0


def _kernel_of(graph: CompGraph, bits: IntArray) -> IntArray:
    """Each op's kernel, named by its root (highest index member), under rule 1."""
    n = graph.num_ops
    parent = np.arange(n)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    for u, v in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True):
        if bits[u]:
            a, b = find(u), find(v)
            if a != b:
                parent[min(a, b)] = max(a, b)
    return np.array([find(i) for i in range(n)], dtype=np.int64)


def _cyclic_kernels(graph: CompGraph, bits: IntArray) -> list[int]:
    """Roots of the kernels on a cycle of the contracted graph (rule 2e)."""
    import networkx as nx

    roots = _kernel_of(graph, bits)
    src, dst = roots[graph.edge_src], roots[graph.edge_dst]
    cross = src != dst
    if not cross.any():
        return []
    kg = nx.DiGraph()
    kg.add_edges_from(zip(src[cross].tolist(), dst[cross].tolist(), strict=True))
    return sorted(k for scc in nx.strongly_connected_components(kg) if len(scc) > 1 for k in scc)
