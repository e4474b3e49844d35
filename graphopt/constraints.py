"""Placement constraints: where each op may run, for one (graph, cluster) pair.

Two sources of constraints, both off by default:

- **Allowed device kinds** (the graph's ``allowed`` column, :attr:`CompGraph.allowed`): an op
  with a non-empty list may run only on devices whose ``kind`` is in it (an op with no kernel
  for a device kind: a CPU-only op); an empty list allows any device.
- **Enforced colocation** (the cluster's ``colocation: enforce``,
  :attr:`graphopt.hardware.Cluster.colocation`): the ops of one colocation group
  (:attr:`CompGraph.colocation`, non-empty names) must all run on one device. Under the default
  ``colocation: hint`` the groups are only a hint for placers and constrain nothing.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    """

    graph: CompGraph
    cluster: Cluster
    allowed: np.ndarray | None
    group: IntArray | None
    group_names: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """Whether any constraint applies (False: every placement keeps them)."""
        return self.allowed is not None or self.group is not None

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
        return ""

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
        return out

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
        """``ops`` with every op of their enforced colocation groups (sorted, unique): what
        moves when they move."""
        ops = np.atleast_1d(np.asarray(ops, dtype=np.int64))
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
    if cluster.colocation == "enforce" and any(graph.colocation):
        ids: dict[str, int] = {}
        group = np.array(
            [ids.setdefault(c, len(ids)) if c else -1 for c in graph.colocation], dtype=np.int64
        )
        names = tuple(ids)
    out = Constraints(graph, cluster, allowed, group, names)
    if group is not None:
        _check_groups(out)
    return out


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
