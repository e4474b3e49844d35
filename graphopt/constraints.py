"""Placement constraints: where each op may run, for one (graph, cluster) pair.

Three sources of constraints, all off by default:

- **Allowed device kinds** (the graph's ``allowed`` column, :attr:`CompGraph.allowed`): an op
  with a non-empty list may run only on devices whose ``kind`` is in it (an op with no kernel
  for a device kind: a CPU-only op); an empty list allows any device.
- **Enforced colocation** (the cluster's ``colocation: enforce``,
  :attr:`graphopt.hardware.Cluster.colocation`): the ops of one colocation group
  (:attr:`CompGraph.colocation`, non-empty names) must all run on one device. Under the default
  ``colocation: hint`` the groups are only a hint for placers and constrain nothing.
- **Contiguous stages** (the cluster's ``contiguous: true``,
  :attr:`graphopt.hardware.Cluster.contiguous`): the placement is a contiguous split of the
  block DAG (:mod:`graphopt.blocks`): every block runs on one device, and the stages (each
  device, but a CPU beside accelerators, whose blocks are stages of their own:
  :func:`graphopt.blocks.singleton_devices`), contracted, leave the block DAG acyclic, so that
  no edge runs from a later stage to an earlier one. A block holds whole colour classes
  (colocation group, else layer), so this keeps every colocation group on one device too.

:func:`constraints` builds the :class:`Constraints` of a pair and checks that they can be met;
it is the one home of the rules. Every method uses it: the simulator marks a placement that
breaks them invalid (:meth:`Constraints.violation` names the op); placers, searches, decoders
and environments keep to :meth:`Constraints.project` (a placement moved onto allowed devices)
or draw their moves from :meth:`Constraints.choices` and :meth:`Constraints.members`; the list
schedulers (HEFT, the placement decoder) keep ops off barred devices inside their loop
(:meth:`Constraints.barred_bias`).

Projection (:meth:`Constraints.project`), deterministic, identity on a placement that keeps the
rules:

1. in topological order, an op on a device it may not use moves to the device of its first
   producer (in the producer order of :attr:`CompGraph.predecessors_csr`) that it may use, else
   to its allowed device of most peak FLOP/s (ties: lowest index);
2. under ``colocation: enforce``, each group then moves as one to the device, among those every
   member may use, that holds most of its members (ties: lowest index), else to the one of most
   peak FLOP/s.
3. under ``contiguous: true``, each block moves as one the same way; if the stages still form a
   cycle, the blocks are walked in their topological order, the stages opened in the order the
   walk meets them and each closed once the walk has left it: a block on a closed stage, or one
   that a path through another stage's blocks leads back to from the open stage, moves to the
   open stage when it may and that closes no cycle, else to a stage not yet opened (its allowed
   device of lowest index), else to a CPU that runs blocks one by one; if none of these is
   allowed, the projection is the contiguous placement found when the constraints were built
   (every op on the device of most peak FLOP/s that it may use, projected by this rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.blocks import BlockDag, block_dag, class_names, singleton_devices, stage_cycle
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import IntArray

BARRED = 1e30
"""Seconds that list schedulers add to the score of a device an op may not use (above any real
score), so that they never choose it while another device is allowed."""


@dataclass(frozen=True, eq=False)
class Constraints:
    """The placement constraints of a (graph, cluster) pair (module docstring); build it with
    :func:`constraints`.

    Attributes:
        graph: the graph.
        cluster: the cluster.
        allowed: ``(N, D)`` bool, True where op ``i`` may run on device ``d``; ``None`` when every
            op may run everywhere.
        group: ``(N,)`` enforced colocation group of each op, ``-1`` for none; ``None`` when
            colocation is not enforced or no op has a group.
        group_names: the name of each enforced group, by group index.
        blocks: under ``contiguous: true``, the block DAG whose splits must be contiguous;
            ``None`` otherwise.
        fallback: under ``contiguous: true``, a placement that keeps every constraint (the
            projection's last resort, module docstring); ``None`` otherwise.
    """

    graph: CompGraph
    cluster: Cluster
    allowed: np.ndarray | None
    group: IntArray | None
    group_names: tuple[str, ...] = ()
    blocks: BlockDag | None = None
    fallback: IntArray | None = None

    @property
    def active(self) -> bool:
        """Whether any constraint applies (False: every placement keeps them)."""
        return self.allowed is not None or self.group is not None or self.blocks is not None

    @property
    def contiguous(self) -> bool:
        """Whether placements must be contiguous splits of the block DAG (``contiguous: true``)."""
        return self.blocks is not None

    # ------------------------------------------------------------------ derived arrays
    def _device_mask(self) -> np.ndarray:
        """``(N, D)`` bool: the allowed devices of each op, groups not applied."""
        if self.allowed is not None:
            return self.allowed
        return np.ones((self.graph.num_ops, self.cluster.num_devices), dtype=bool)

    def _group_arrays(self) -> tuple[IntArray, IntArray, np.ndarray]:
        """``(grouped ops, their group, (G, D) devices every member may use)``."""
        assert self.group is not None
        grouped = np.flatnonzero(self.group >= 0)
        num_groups = len(self.group_names)
        common = np.ones((num_groups, self.cluster.num_devices), dtype=bool)
        np.logical_and.at(common, self.group[grouped], self._device_mask()[grouped])
        return grouped, self.group[grouped], common

    def _first_of_group(self, grouped: IntArray, group: IntArray) -> IntArray:
        """``(G,)`` the first (lowest-index) op of each group."""
        first = np.empty(len(self.group_names), dtype=np.int64)
        first[group[::-1]] = grouped[::-1]
        return first

    # ------------------------------------------------------------------ checks
    def violations(self, placements: IntArray) -> np.ndarray:
        """``(B,)`` bool: which rows of ``placements`` ``(B, N)`` break a constraint."""
        placements = np.asarray(placements, dtype=np.int64)
        bad = np.zeros(len(placements), dtype=bool)
        if self.allowed is not None:
            ops = np.arange(self.graph.num_ops)
            bad |= ~self.allowed[ops[None, :], placements].all(axis=1)
        if self.group is not None:
            grouped, group = np.flatnonzero(self.group >= 0), self.group[self.group >= 0]
            first = self._first_of_group(grouped, group)
            bad |= (placements[:, grouped] != placements[:, first[group]]).any(axis=1)
        if self.blocks is not None:
            block = self.blocks.block
            bad |= (placements != placements[:, self._block_first()[block]]).any(axis=1)
            singletons = singleton_devices(self.cluster)
            for r in np.flatnonzero(~bad).tolist():
                device = np.empty(self.blocks.num_blocks, dtype=np.int64)
                device[block] = placements[r]
                bad[r] = len(stage_cycle(self.blocks, device, singletons)) > 0
        return bad

    def violation(self, placement: IntArray) -> str:
        """Why ``placement`` ``(N,)`` breaks a constraint, naming the first op that does (the
        rules in topological order), or ``""`` when it keeps them all."""
        placement = np.asarray(placement, dtype=np.int64)
        g, devices = self.graph, self.cluster.devices
        if self.allowed is not None:
            ok = self.allowed[np.arange(g.num_ops), placement]
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                dev = devices[placement[i]]
                return (
                    f"placement constraint: op {g.op_names[i]!r} is on device {placement[i]} "
                    f"({dev.name}, kind {dev.kind}); it may run only on device kind(s) "
                    f"{', '.join(g.allowed[i])} (the graph's 'allowed' column)"
                )
        if self.group is not None:
            grouped, group = np.flatnonzero(self.group >= 0), self.group[self.group >= 0]
            first = self._first_of_group(grouped, group)
            split = placement[grouped] != placement[first[group]]
            if split.any():
                k = int(np.flatnonzero(split)[0])
                a, b = int(first[group[k]]), int(grouped[k])
                return (
                    f"placement constraint: colocation group {self.group_names[group[k]]!r} is "
                    f"split: op {g.op_names[a]!r} on device {placement[a]} "
                    f"({devices[placement[a]].name}), op {g.op_names[b]!r} on device "
                    f"{placement[b]} ({devices[placement[b]].name}); the cluster enforces "
                    "colocation (colocation: enforce)"
                )
        if self.blocks is not None:
            return self._contiguity_violation(placement)
        return ""

    def _block_first(self) -> IntArray:
        """``(B,)`` the first (lowest-index) op of each block."""
        assert self.blocks is not None
        block = self.blocks.block
        first = np.empty(self.blocks.num_blocks, dtype=np.int64)
        first[block[::-1]] = np.arange(len(block))[::-1]
        return first

    def _contiguity_violation(self, placement: IntArray) -> str:
        """:meth:`violation` of the contiguity rule (a block split, or stages on a cycle)."""
        assert self.blocks is not None
        g, devices, block = self.graph, self.cluster.devices, self.blocks.block
        first = self._block_first()
        split = placement != placement[first[block]]
        rule = "the cluster demands contiguous stages (contiguous: true)"
        if split.any():
            b = int(np.flatnonzero(split)[0])
            a = int(first[block[b]])
            return (
                f"placement constraint: the block of op {g.op_names[a]!r} is split: op "
                f"{g.op_names[a]!r} on device {placement[a]} ({devices[placement[a]].name}), op "
                f"{g.op_names[b]!r} on device {placement[b]} ({devices[placement[b]].name}); "
                f"{rule}, and a block (ops of one colocation group or layer, and what lies "
                "between them) runs on one device"
            )
        cycle = stage_cycle(self.blocks, placement[first], singleton_devices(self.cluster))
        if len(cycle) == 0:
            return ""
        k = int(cycle[0])
        bs, bd = int(self.blocks.edge_src[k]), int(self.blocks.edge_dst[k])
        u, v = int(first[bs]), int(first[bd])
        for src, dst in ((g.edge_src, g.edge_dst), (g.edge_dst, g.edge_src)):
            on = np.flatnonzero((block[src] == bs) & (block[dst] == bd))
            if len(on):  # an edge of the graph (or a mirrored backward edge) behind this one
                u, v = int(src[on[0]]), int(dst[on[0]])
                break
        du, dv = int(placement[u]), int(placement[v])
        return (
            f"placement constraint: op {g.op_names[v]!r} on device {dv} ({devices[dv].name}) "
            f"follows op {g.op_names[u]!r} on device {du} ({devices[du].name}), and a path of "
            f"the block DAG leads from device {dv}'s blocks back to device {du}'s: the stages "
            f"form a cycle, no pipeline order; {rule}"
        )

    # ------------------------------------------------------------------ keeping to them
    def project(self, placement: IntArray) -> IntArray:
        """``placement`` moved onto allowed devices (module docstring); a new ``int64`` array,
        equal to ``placement`` when it keeps every constraint."""
        out = np.array(placement, dtype=np.int64).reshape(-1)
        if not self.active or not self.violations(out[None, :])[0]:
            return out
        peak = self.cluster.peak_flops
        # devices by decreasing peak FLOP/s, ties by index: the fallback order
        by_speed = np.lexsort((np.arange(len(peak)), -peak))
        if self.allowed is not None:
            pred_ptr, pred_src, _ = self.graph.predecessors_csr
            for u in np.flatnonzero(~self.allowed[np.arange(len(out)), out]).tolist():
                ok = self.allowed[u]
                producers = out[pred_src[pred_ptr[u] : pred_ptr[u + 1]]]
                usable = producers[ok[producers]]
                out[u] = usable[0] if len(usable) else by_speed[ok[by_speed]][0]
        if self.group is not None:
            grouped, group, common = self._group_arrays()
            counts = np.zeros_like(common, dtype=np.int64)
            np.add.at(counts, (group, out[grouped]), 1)
            counts[~common] = -1
            # the most members, ties lowest index; with no member on a usable device, the fastest
            best = np.argmax(counts, axis=1)
            fastest = np.array([by_speed[row[by_speed]][0] for row in common], dtype=np.int64)
            target = np.where(counts.max(axis=1) > 0, best, fastest)
            out[grouped] = target[group]
        if self.blocks is not None:
            found = self._contiguous(out, by_speed)
            out = found if found is not None else np.array(self.fallback, dtype=np.int64)
        return out

    def _contiguous(self, placement: IntArray, by_speed: IntArray) -> IntArray | None:
        """Rule 3 of the projection (module docstring) on a placement that keeps the allowed
        devices: the contiguous placement, or ``None`` where the walk finds no allowed stage."""
        assert self.blocks is not None
        dag, block = self.blocks, self.blocks.block
        num_blocks, num_dev = dag.num_blocks, self.cluster.num_devices
        common = np.ones((num_blocks, num_dev), dtype=bool)
        np.logical_and.at(common, block, self._device_mask())
        counts = np.zeros((num_blocks, num_dev), dtype=np.int64)
        np.add.at(counts, (block, placement), 1)
        counts[~common] = -1
        fastest = np.array([by_speed[row[by_speed]][0] for row in common], dtype=np.int64)
        device = np.where(counts.max(axis=1) > 0, np.argmax(counts, axis=1), fastest)
        singletons = singleton_devices(self.cluster)
        if len(stage_cycle(dag, device, singletons)):
            walked = _walk(dag, device, common, singletons)
            if walked is None:
                return None
            device = walked
            assert len(stage_cycle(dag, device, singletons)) == 0
        return device[block]

    def barred_bias(self) -> np.ndarray:
        """``(N, D)``: ``-BARRED`` where an op may not run, 0 elsewhere: the score bias that
        keeps a list scheduler (HEFT's loop, :func:`graphopt.baselines.heft.list_schedule`) off
        barred devices."""
        return np.where(self._device_mask(), 0.0, -BARRED)

    def choices(self, ops: IntArray | int) -> np.ndarray:
        """``(D,)`` bool: the devices that every op of ``ops`` and of their enforced groups may
        use (where a move of those ops may go)."""
        ops = self.members(ops)
        return np.asarray(self._device_mask()[ops].all(axis=0), dtype=bool)

    def members(self, ops: IntArray | int) -> IntArray:
        """``ops`` with every op of their enforced colocation groups, or under ``contiguous:
        true`` of their blocks (sorted, unique): what moves when they move. A move of them to a
        device of :meth:`choices` may still put the stages on a cycle under ``contiguous: true``;
        the searches project what they draw (:meth:`project`)."""
        ops = np.atleast_1d(np.asarray(ops, dtype=np.int64))
        if self.blocks is not None:  # a block holds whole groups
            block = self.blocks.block
            return np.flatnonzero(np.isin(block, block[ops]))
        if self.group is None:
            return np.unique(ops)
        groups = self.group[ops]
        extra = np.flatnonzero(np.isin(self.group, groups[groups >= 0]))
        return np.union1d(ops, extra)


def constraints(graph: CompGraph, cluster: Cluster) -> Constraints:
    """The :class:`Constraints` of ``graph`` on ``cluster``, checked.

    Raises:
        ValueError: naming the graph and the op or group: an op allowed on no device kind of
            the cluster; under ``colocation: enforce``, a group whose ops share no allowed
            device, or whose parameters exceed the memory of every device it may use.
    """
    n, num_dev = graph.num_ops, cluster.num_devices
    allowed = None
    if graph.allowed:
        kinds = np.array([d.kind for d in cluster.devices], dtype=object)
        allowed = np.ones((n, num_dev), dtype=bool)
        for i, kinds_i in enumerate(graph.allowed):
            if kinds_i:
                allowed[i] = np.isin(kinds, kinds_i)
        if not allowed.any(axis=1).all():
            i = int(np.flatnonzero(~allowed.any(axis=1))[0])
            raise ValueError(
                f"graph {graph.name!r}: op {graph.op_names[i]!r} may run only on device kind(s) "
                f"{', '.join(graph.allowed[i])}, and cluster {cluster.name!r} has none (its "
                f"kinds: {', '.join(cluster.kinds)}); add such a device to the cluster or widen "
                "the op's 'allowed' list in the graph file"
            )
    group = None
    names: tuple[str, ...] = ()
    if cluster.model.enforce_colocation and any(graph.colocation):
        ids: dict[str, int] = {}
        group = np.array(
            [ids.setdefault(c, len(ids)) if c else -1 for c in graph.colocation], dtype=np.int64
        )
        names = tuple(ids)
    out = Constraints(graph, cluster, allowed, group, names)
    if group is not None:
        _check_groups(out)
    if cluster.contiguous and graph.num_ops:
        out = _with_blocks(out)
    return out


def _walk(
    dag: BlockDag, device: IntArray, common: np.ndarray, singletons: np.ndarray
) -> IntArray | None:
    """The walk of rule 3 (module docstring): ``device`` ``(B,)`` (every block on an allowed
    device) made contiguous, or ``None`` when a block finds no allowed stage. ``common``:
    ``(B, D)`` the devices every op of a block may use.

    Why it is contiguous: every stage that is no singleton holds one run of the walk (it is
    never reopened), so an edge between two such stages runs forward in the order they were
    opened; a path that leaves the open stage and comes back to it passes only singletons (any
    other stage would have closed it), and that is the conflict the walk moves a block for."""
    num_blocks = len(device)
    order = np.argsort(dag.edge_dst, kind="stable")
    ptr = np.searchsorted(dag.edge_dst[order], np.arange(num_blocks + 1))
    preds = dag.edge_src[order]
    out = np.array(device, dtype=np.int64)
    used = np.zeros(len(singletons), dtype=bool)  # opened (the open one, or closed)
    reach = np.zeros(num_blocks, dtype=bool)  # reached from the open stage's blocks
    cur = -1
    for b in range(num_blocks):
        p = preds[ptr[b] : ptr[b + 1]]
        d = int(out[b])
        if singletons[d]:
            reach[b] = bool(np.any((out[p] == cur) | reach[p])) if cur >= 0 else False
            continue
        conflict = cur >= 0 and bool(np.any((out[p] != cur) & reach[p]))
        if d == cur and not conflict:
            continue
        if d != cur and not used[d]:
            cur, used[d] = d, True
            reach[:b] = False  # paths from the closed stage no longer matter
            continue
        if d != cur and cur >= 0 and common[b, cur] and not conflict:
            out[b] = cur
            continue
        fresh = np.flatnonzero(common[b] & ~used & ~singletons)
        if len(fresh):
            cur = int(fresh[0])
            out[b], used[cur] = cur, True
            reach[:b] = False
            continue
        alone = np.flatnonzero(common[b] & singletons)
        if not len(alone):
            return None
        out[b] = int(alone[0])
        reach[b] = bool(np.any((out[p] == cur) | reach[p])) if cur >= 0 else False
    return out


def _with_blocks(c: Constraints) -> Constraints:
    """``c`` with the contiguity rule (``contiguous: true``): the block DAG and a placement that
    keeps every rule, checked.

    Raises:
        ValueError: naming the graph and an op: a block whose ops share no allowed device,
            whose parameters exceed the memory of every device it may use, or a graph for which
            the projection finds no contiguous split onto allowed devices.
    """
    graph, cluster = c.graph, c.cluster
    dag = block_dag(graph)
    block = dag.block
    common = np.ones((dag.num_blocks, cluster.num_devices), dtype=bool)
    np.logical_and.at(common, block, c._device_mask())
    first = np.empty(dag.num_blocks, dtype=np.int64)
    first[block[::-1]] = np.arange(len(block))[::-1]
    fix = (
        "set contiguous: false in the cluster file, or give the ops other colocation groups/layers"
    )
    if not common.any(axis=1).all():
        b = int(np.flatnonzero(~common.any(axis=1))[0])
        kinds = sorted({", ".join(graph.allowed[i]) or "any" for i in np.flatnonzero(block == b)})
        raise ValueError(
            f"graph {graph.name!r}: no contiguous split onto cluster {cluster.name!r}: the block "
            f"of op {graph.op_names[first[b]]!r} must run on one device, its ops allow the device "
            f"kinds {' / '.join(kinds)}, and no device is allowed for all of them; {fix}"
        )
    params = np.bincount(block, weights=graph.param_bytes, minlength=dag.num_blocks)
    room = np.where(common, cluster.memory[None, :], 0.0).max(axis=1)
    over = params > room
    if over.any():
        b = int(np.flatnonzero(over)[0])
        raise ValueError(
            f"graph {graph.name!r}: no contiguous split onto cluster {cluster.name!r}: the block "
            f"of op {graph.op_names[first[b]]!r} ({class_names(graph, np.flatnonzero(block == b))})"
            " must run on one device and holds "
            f"{params[b] / 1e9:.3f} GB of parameters, more than any device it may run on "
            f"({room[b] / 1e9:.3f} GB); use larger devices or {fix}"
        )
    with_dag = Constraints(graph, cluster, c.allowed, c.group, c.group_names, blocks=dag)
    peak = cluster.peak_flops
    by_speed = np.lexsort((np.arange(len(peak)), -peak))
    base = np.full(graph.num_ops, by_speed[0], dtype=np.int64)
    mask = with_dag._device_mask()
    for u in np.flatnonzero(~mask[np.arange(graph.num_ops), base]).tolist():
        base[u] = by_speed[mask[u][by_speed]][0]
    found = with_dag._contiguous(base, by_speed)
    if found is None:
        raise ValueError(
            f"graph {graph.name!r}: no contiguous split onto cluster {cluster.name!r} found that "
            "keeps every op on a device kind it may use (the graph's 'allowed' column); "
            f"{fix}, or add devices of the kinds its blocks need"
        )
    return Constraints(
        graph, cluster, c.allowed, c.group, c.group_names, blocks=dag, fallback=found
    )


def _check_groups(c: Constraints) -> None:
    """Raise ``ValueError`` for an enforced group with no shared device or too many parameters."""
    graph, cluster = c.graph, c.cluster
    grouped, group, common = c._group_arrays()
    if not common.any(axis=1).all():
        g = int(np.flatnonzero(~common.any(axis=1))[0])
        members = grouped[group == g]
        kinds = sorted({", ".join(graph.allowed[i]) or "any" for i in members})
        raise ValueError(
            f"graph {graph.name!r}: colocation group {c.group_names[g]!r} cannot be placed on "
            f"one device of cluster {cluster.name!r}: its ops allow the device kinds "
            f"{' / '.join(kinds)}, and no device is allowed for all of them; split the group or "
            "set colocation: hint in the cluster file"
        )
    params = np.bincount(group, weights=graph.param_bytes[grouped], minlength=len(common))
    room = np.where(common, cluster.memory[None, :], 0.0).max(axis=1)
    over = params > room
    if over.any():
        g = int(np.flatnonzero(over)[0])
        raise ValueError(
            f"graph {graph.name!r}: colocation group {c.group_names[g]!r} holds "
            f"{params[g] / 1e9:.3f} GB of parameters, more than the memory of any device of "
            f"cluster {cluster.name!r} it may run on ({room[g] / 1e9:.3f} GB), and colocation is "
            "enforced; split the group, use larger devices or set colocation: hint"
        )
