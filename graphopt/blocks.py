"""The block DAG of Tarnawski et al. (NeurIPS 2020, section 3): colour classes contracted, the
classes that become mutually reachable fused, the blocks in topological order.

The placers that cut a graph into contiguous stages (Tarnawski et al.'s greedy and dynamic
program, PipeDream's planner: :mod:`~graphopt.baselines.contiguous`) work on these blocks.

**Colour classes** (:func:`op_groups`): ops that must share a device. An op's class is its
colocation group, else its layer, else the op alone (so a layer's forward op, its gradient ops
and its weight update stay together).

**Forward and backward** (:func:`forward_ops`): on a training graph contiguity is a property of
the forward pass; a backward op rides with its class. As in the authors' code, each class is
split into its forward and its backward ops, only edges between forward ops order the classes,
and a class with backward ops only stands in the forward graph by the mirror image of its
backward edges (an edge ``u -> v`` between backward ops, one of them in such a class, orders
``class(v)`` before ``class(u)``). The forward part is the first ``metadata["forward_ops"]`` ops
of a graph whose ``metadata["training"]`` is true (the torch and PipeDream importers record it);
every other graph is all forward.

**Blocks** (:func:`block_dag`): the classes contracted on the forward graph, its strongly
connected components fused (an edge from an early weight to a late consumer puts everything
between into one block), numbered in the topological order of the resulting DAG that, among
the blocks ready at each step, takes the one holding the earliest op. Where the classes already
form a DAG this is the order of their first op. A *contiguous split* is a chain of ideals
(downward-closed sets) of this DAG: no edge of it runs from a later stage to an earlier one.

**Stages of a cluster** (:func:`singleton_devices`): in a cluster with devices of kind ``CPU``
beside other kinds, the CPUs run their blocks one by one (Tarnawski et al.'s CPU fallback), each
block a stage of its own; every other device, and every device of a cluster of one kind, is one
stage. :func:`stage_cycle` checks a placement against this, as the cluster option ``contiguous:
true`` demands (:mod:`graphopt.constraints`).
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from graphopt.graph import CompGraph
from graphopt.hardware import HOST_KIND, Cluster
from graphopt.typing import IntArray


def op_groups(graph: CompGraph) -> tuple[IntArray, int]:
    """``(group, G)``: each op's colour class (colocation group, else layer, else the op alone),
    numbered ``0..G-1`` in the order of their first op."""
    keys = [
        c or lay or name
        for c, lay, name in zip(graph.colocation, graph.layer, graph.op_names, strict=True)
    ]
    index: dict[str, int] = {}
    group = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)
    return group, len(index)


def class_names(graph: CompGraph, ops: IntArray) -> str:
    """The colour classes of ``ops`` (one block) for a message: ``colour class 'B'``, ``colour
    classes 'A', 'B'`` (several fused into one block; the first three named), or ``op 'x'``
    when its ops are in no class."""
    members = np.asarray(ops).tolist()
    named = list(dict.fromkeys(graph.colocation[i] or graph.layer[i] for i in members))
    named = [k for k in named if k]
    if not named:
        return f"op {graph.op_names[members[0]]!r}"
    shown = ", ".join(repr(k) for k in named[:3])
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    return f"colour class{'es' if len(named) > 1 else ''} {shown}{more}"


def forward_ops(graph: CompGraph) -> int:
    """How many leading ops (graph order) are the forward pass (module docstring): all of them
    unless the graph is a training graph that records its forward part."""
    n = graph.num_ops
    count = graph.metadata.get("forward_ops")
    if not graph.metadata.get("training") or not isinstance(count, int) or not 0 < count < n:
        return n
    return count


@dataclass(frozen=True)
class BlockDag:
    """Ops in blocks, blocks in topological order (module docstring).

    Attributes:
        block: ``(N,)`` the block of each op, ``0..B-1``.
        edge_src: ``(M,)`` source block of each edge of the DAG (unique pairs).
        edge_dst: ``(M,)`` destination block of each edge, always ``> edge_src``.
    """

    block: IntArray
    edge_src: IntArray
    edge_dst: IntArray

    @property
    def num_blocks(self) -> int:
        return int(self.block.max()) + 1 if len(self.block) else 0


def class_edges(graph: CompGraph, group: IntArray, count: int) -> tuple[IntArray, IntArray]:
    """The edges ``(a, b)`` between colour classes that order them: forward edges, and mirrored
    backward edges of classes without forward ops (module docstring); with repeats."""
    forward = np.arange(graph.num_ops) < forward_ops(graph)
    has_forward = np.bincount(group[forward], minlength=count) > 0
    src, dst = graph.edge_src, graph.edge_dst
    gs, gd = group[src], group[dst]
    cross = gs != gd
    ahead = cross & forward[src] & forward[dst]
    mirror = cross & ~forward[src] & ~forward[dst] & ~(has_forward[gs] & has_forward[gd])
    return np.concatenate((gs[ahead], gd[mirror])), np.concatenate((gd[ahead], gs[mirror]))


def block_dag(graph: CompGraph) -> BlockDag:
    """The block DAG of ``graph`` (module docstring)."""
    n = graph.num_ops
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return BlockDag(empty, empty, empty)
    group, count = op_groups(graph)
    a, b = class_edges(graph, group, count)
    matrix = coo_matrix((np.ones(len(a)), (a, b)), shape=(count, count)).tocsr()
    num_comp, comp = connected_components(matrix, directed=True, connection="strong")
    first = np.full(num_comp, n, dtype=np.int64)
    np.minimum.at(first, comp[group], np.arange(n))
    ca, cb = comp[a], comp[b]
    pairs = np.unique(np.stack((ca, cb))[:, ca != cb], axis=1)
    dag = nx.DiGraph()
    dag.add_nodes_from(range(num_comp))
    dag.add_edges_from(zip(pairs[0].tolist(), pairs[1].tolist(), strict=True))
    order = np.fromiter(
        nx.lexicographical_topological_sort(dag, key=lambda c: int(first[c])),
        dtype=np.int64,
        count=num_comp,
    )
    rank = np.empty(num_comp, dtype=np.int64)
    rank[order] = np.arange(num_comp)
    src, dst = rank[pairs[0]], rank[pairs[1]]
    assert np.all(src < dst)
    return BlockDag(
        block=rank[comp[group]],
        edge_src=src.astype(np.int64),
        edge_dst=dst.astype(np.int64),
    )


def is_contiguous(
    dag: BlockDag, block_stage: IntArray, *, singletons: IntArray | None = None
) -> bool:
    """Whether stages (``block_stage[b]``: the stage of block ``b``) are contiguous: the stages,
    contracted, leave the block DAG acyclic, so that they can run in a pipeline order with no
    edge from a later stage to an earlier one. Blocks whose stage is in ``singletons`` (the
    greedy's CPU, which runs each block on its own) stay uncontracted."""
    stage = np.asarray(block_stage, dtype=np.int64)
    node = stage.copy()
    if singletons is not None and len(singletons):
        alone = np.isin(stage, singletons)
        node[alone] = stage.max() + 1 + np.flatnonzero(alone)
    ns, nd = node[dag.edge_src], node[dag.edge_dst]
    graph = nx.DiGraph()
    graph.add_nodes_from(np.unique(node).tolist())
    keep = ns != nd
    graph.add_edges_from(zip(ns[keep].tolist(), nd[keep].tolist(), strict=True))
    return nx.is_directed_acyclic_graph(graph)


def singleton_devices(cluster: Cluster) -> np.ndarray:
    """``(D,)`` bool: the devices whose blocks are each a stage of their own (module docstring):
    those of kind ``CPU`` when the cluster has other kinds too, else none."""
    is_cpu = np.array([d.kind == HOST_KIND for d in cluster.devices], dtype=bool)
    return is_cpu if 0 < is_cpu.sum() < len(is_cpu) else np.zeros(len(is_cpu), dtype=bool)


def stage_cycle(dag: BlockDag, block_device: IntArray, singletons: np.ndarray) -> IntArray:
    """The block DAG's edges on a cycle of the stages, or none when they are contiguous.

    Args:
        dag: the block DAG.
        block_device: ``(B,)`` the device of each block.
        singletons: ``(D,)`` bool, the devices whose blocks are stages of their own.

    Returns:
        the indices (into ``dag.edge_src``) of the edges between two different stages that lie
        on a cycle of the contracted stages (empty: the split is contiguous). Compiled code
        (scipy's strongly connected components), linear in the blocks and edges.
    """
    device = np.asarray(block_device, dtype=np.int64)
    num_dev = len(singletons)
    node = np.where(singletons[device], num_dev + np.arange(len(device)), device)
    ns, nd = node[dag.edge_src], node[dag.edge_dst]
    cross = np.flatnonzero(ns != nd)
    if len(cross) == 0:
        return cross
    size = num_dev + len(device)
    matrix = coo_matrix((np.ones(len(cross)), (ns[cross], nd[cross])), shape=(size, size)).tocsr()
    count, comp = connected_components(matrix, directed=True, connection="strong")
    if count == size:
        return np.zeros(0, dtype=np.int64)
    return cross[comp[ns[cross]] == comp[nd[cross]]]
