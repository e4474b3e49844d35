"""The simulator's Python face: per-graph preparation, single and batched evaluation.

:class:`PreparedGraph` does the per-(graph, cluster) work once (CSR adjacency, every op's time on
every device); its :meth:`~PreparedGraph.evaluate` and :meth:`~PreparedGraph.evaluate_batch` then
only run the compiled event loop. :class:`Simulator` implements the :class:`~graphopt.typing.CostModel`
protocol and keeps a small cache of prepared graphs. The rules are in :mod:`graphopt.sim`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from cachetools import LRUCache

from graphopt.constraints import Constraints, constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import engine
from graphopt.sim.arrays import GraphArrays, Workspace, succ_to_pred
from graphopt.sim.fusion_rules import RULE_OK, FusionRules
from graphopt.sim.links import link_arrays
from graphopt.typing import (
    Decision,
    FloatArray,
    IntArray,
    KernelRecord,
    Measurement,
    Schedule,
    TransferRecord,
)

MAX_PRIORITY = 2**31
"""Priority levels must be below this (the engine packs a level and a kernel index in one int64)."""


STATUS_CONSTRAINT = 3
"""The status of a placement that breaks a placement constraint (:mod:`graphopt.constraints`),
beside the engine's ``STATUS_OK`` (0), ``STATUS_OOM`` (1) and ``STATUS_ILLEGAL_FUSION`` (2)."""

NOT_FINITE = (
    "the step time is not finite: the graph's costs overflow (an op time or a sum of them beyond "
    "1.8e308 s); check the graph's FLOPs, bytes and measured times"
)
"""The reason of a decision whose simulated step time overflows: never a valid result."""


class Timeline(NamedTuple):
    """One simulated timeline as arrays (:meth:`PreparedGraph.evaluate_timeline`): ``K`` kernels
    in the engine's numbering, ``T`` transfers."""

    kernel_of: IntArray
    """``(N,)`` each op's kernel."""
    root: IntArray
    """``(K,)`` each kernel's root op (the last of its ops; its priority orders the kernel)."""
    device: IntArray
    """``(K,)``."""
    start: FloatArray
    """``(K,)`` seconds."""
    end: FloatArray
    """``(K,)`` seconds."""
    t_producer: IntArray
    """``(T,)`` the op whose output each transfer carries."""
    t_dst: IntArray
    """``(T,)`` the device it goes to."""
    t_start: FloatArray
    """``(T,)`` seconds."""
    t_end: FloatArray
    """``(T,)`` seconds."""


@dataclass(frozen=True)
class BatchResult:
    """Results of :meth:`PreparedGraph.evaluate_batch` for ``B`` decisions, as arrays."""

    step_time: FloatArray
    """``(B,)`` seconds; ``inf`` where the fusion is illegal."""
    valid: np.ndarray
    """``(B,)`` bool."""
    status: IntArray
    """``(B,)``: 0 valid, 1 out of memory, 2 illegal fusion, 3 a placement constraint broken
    (:data:`STATUS_CONSTRAINT`; step time ``inf``)."""
    busy_time: FloatArray
    """``(B, D)``."""
    peak_memory: FloatArray
    """``(B, D)``."""
    bytes_moved: FloatArray
    """``(B,)``."""


def _check_array(name: str, value: object, n: int, high: int | None) -> IntArray:
    arr = np.asarray(value)
    if arr.shape != (n,):
        raise ValueError(
            f"decision.{name} has shape {arr.shape}; expected ({n},), one entry per op"
        )
    if arr.dtype.kind not in "iub":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ValueError(f"decision.{name} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if not arr.flags.writeable:
        # numba types a read-only array apart from a writable one: the engine would be compiled
        # a second time (half a minute on a cold cache) for read-only decisions (frozen arrays)
        arr = arr.copy()
    if n and arr.min() < 0:
        raise ValueError(
            f"decision.{name} has negative entry {int(arr.min())} at op {int(arr.argmin())}"
        )
    if high is not None and n and arr.max() >= high:
        i = int(arr.argmax())
        raise ValueError(
            f"decision.{name} has entry {int(arr[i])} at op {i}; allowed values are 0..{high - 1}"
        )
    return arr


class PreparedGraph:
    """A graph and a cluster, prepared for fast repeated simulation.

    Args:
        graph: the computation graph.
        cluster: the devices and links.

    Raises:
        ValueError: placement constraints that no placement can meet
            (:func:`graphopt.constraints.constraints`).
    """

    def __init__(self, graph: CompGraph, cluster: Cluster) -> None:
        self.graph = graph
        self.cluster = cluster
        checked = constraints(graph, cluster)
        self.constraints: Constraints | None = checked if checked.active else None
        """The placement constraints of the pair; ``None`` when there are none. Checked in
        Python before the engine runs: a placement that breaks one is invalid (its reason names
        the op), and the engine never sees it."""
        n, num_dev = graph.num_ops, cluster.num_devices
        self.succ_ptr, self.succ_dst = graph.successors_csr
        self.pred_ptr, self.pred_src, pred_edge_ids = graph.predecessors_csr
        self.succ_to_pred = succ_to_pred(pred_edge_ids)
        self.peak = np.ascontiguousarray(cluster.peak_flops, dtype=np.float64)
        self.bw = np.ascontiguousarray(cluster.mem_bandwidth, dtype=np.float64)
        self.launch = np.ascontiguousarray(cluster.launch_overhead, dtype=np.float64)
        self.capacity = np.ascontiguousarray(cluster.memory, dtype=np.float64)
        # the direct links: the engine takes the via-host route hop by hop (rule 5b)
        self.link_lat, self.link_bw = link_arrays(cluster, route="direct")
        # measured time per op on each device (NaN where its kind was not measured)
        op_meas = np.full((n, num_dev), np.nan)
        for d, device in enumerate(cluster.devices):
            if device.kind in graph.measured:
                op_meas[:, d] = graph.measured[device.kind]
        model = cluster.model  # the model options, decoded once
        if model.op_times == "learned":  # the op model prices what was not measured
            from graphopt.op_model import learned_op_times

            op_meas = learned_op_times(graph, cluster, op_meas)
        # Rule 3: seconds per FLOP and per byte of every op on every device (efficiency per op
        # type or class, 1 where the device names neither).
        cinv, binv = np.empty((n, num_dev)), np.empty((n, num_dev))
        efficiency: dict[tuple[tuple[str, float, float], ...], tuple[Any, Any]] = {}
        for d, device in enumerate(cluster.devices):
            if device.efficiency not in efficiency:
                efficiency[device.efficiency] = device.op_efficiency(
                    graph.op_types, graph.op_classes
                )
            compute, memory = efficiency[device.efficiency]
            cinv[:, d] = 1.0 / (self.peak[d] * compute)
            binv[:, d] = 1.0 / (self.bw[d] * memory)
        roofline = (
            np.maximum(graph.flops[:, None] * cinv, graph.bytes_accessed[:, None] * binv)
            + self.launch[None, :]
        )
        self.op_meas = op_meas
        self.op_time = np.where(np.isnan(op_meas), roofline, op_meas)
        # The engine reads one column per device class: devices of one kind and spec have the same
        # times, and reading one column instead of one per device moves several times fewer bytes.
        specs = [
            (
                device.kind,
                float(self.peak[d]),
                float(self.bw[d]),
                float(self.launch[d]),
                device.efficiency,
            )
            for d, device in enumerate(cluster.devices)
        ]
        classes = list(dict.fromkeys(specs))  # distinct specs, in order of their first device
        self.dev_class = np.array([classes.index(spec) for spec in specs], dtype=np.int64)
        columns = [specs.index(spec) for spec in classes]  # the first device of each class
        self.class_time = np.ascontiguousarray(self.op_time[:, columns])
        self.class_meas = np.ascontiguousarray(self.op_meas[:, columns])
        self.class_cinv = np.ascontiguousarray(cinv[:, columns])
        self.class_binv = np.ascontiguousarray(binv[:, columns])
        int32 = np.int32  # the engine's indices: half the cache footprint in its scattered reads
        self.engine_arrays = GraphArrays(
            succ_ptr=self.succ_ptr.astype(int32),
            succ_dst=self.succ_dst.astype(int32),
            edge_bytes=graph.edge_bytes,
            pred_ptr=self.pred_ptr.astype(int32),
            succ_to_pred=self.succ_to_pred,
            flops=graph.flops,
            nbytes=graph.bytes_accessed,
            out_bytes=graph.output_bytes,
            param_bytes=graph.param_bytes,
            op_time=self.class_time,
            op_meas=self.class_meas,
            dev_class=self.dev_class,
            op_cinv=self.class_cinv,
            op_binv=self.class_binv,
            peak=self.peak,
            bw=self.bw,
            launch=self.launch,
            capacity=self.capacity,
            link_bw=self.link_bw,
            link_lat=self.link_lat,
            contention=model.queued,
            host=model.host,
            per_consumer=model.per_consumer,
            charge_copies=model.charge_copies,
            fcfs=model.fcfs,
        )
        self._engine_graph = tuple(self.engine_arrays)  # plain: see engine.simulate_core
        self._zeros = np.zeros(n, dtype=np.int64)
        self._workspace: Workspace | None = None
        self._rules: FusionRules | None = None

    @property
    def rules(self) -> FusionRules:
        """The fusion rules 2a-2d of this graph (prepared on first use)."""
        if self._rules is None:
            self._rules = FusionRules(self.graph)
        return self._rules

    def workspace(self) -> Workspace:
        """The engine's scratch arrays, allocated on first use and reused (see arrays.Workspace)."""
        if self._workspace is None:
            num_e = self.graph.num_edges
            # routed through the host, a send may take two transfers (engine.plan_routes)
            routed = self.cluster.model.routed
            self._workspace = Workspace.allocate(
                self.graph.num_ops, num_e, 2 * num_e if routed else num_e
            )
        return self._workspace

    @property
    def num_ops(self) -> int:
        return self.graph.num_ops

    def _decision_arrays(self, decision: Decision) -> tuple[IntArray, IntArray, IntArray]:
        n = self.num_ops
        placement = (
            self._zeros
            if decision.placement is None
            else _check_array("placement", decision.placement, n, self.cluster.num_devices)
        )
        priority = (
            self._zeros
            if decision.priority is None
            else _check_array("priority", decision.priority, n, MAX_PRIORITY)
        )
        fusion = (
            self._zeros
            if decision.fusion is None
            else _check_array("fusion", decision.fusion, n, 2)
        )
        return placement, priority, fusion

    def evaluate(self, decision: Decision | None = None, *, schedule: bool = False) -> Measurement:
        """Simulate one decision; with ``schedule=True`` also return the full timeline.

        Raises:
            ValueError: a decision array of the wrong shape, type or range.
        """
        m, out = self._simulate(decision)
        if not schedule or out is None or out[0] == engine.STATUS_ILLEGAL_FUSION:
            return m
        mptr, members, k_dev, k_start, k_end = out[8:13]
        t_op, t_src, t_dst, t_bytes, t_start, t_end = out[13:19]
        sched = Schedule(
            kernels=tuple(
                KernelRecord(
                    ops=tuple(int(x) for x in members[mptr[k] : mptr[k + 1]]),
                    device=int(k_dev[k]),
                    start=float(k_start[k]),
                    end=float(k_end[k]),
                )
                for k in np.argsort(k_start, kind="stable")
            ),
            transfers=tuple(
                TransferRecord(
                    producer=int(t_op[i]),
                    src=int(t_src[i]),
                    dst=int(t_dst[i]),
                    nbytes=float(t_bytes[i]),
                    start=float(t_start[i]),
                    end=float(t_end[i]),
                )
                for i in np.argsort(t_start, kind="stable")
            ),
        )
        return dataclasses.replace(m, schedule=sched)

    def evaluate_timeline(
        self, decision: Decision | None = None, *, describe: bool = True
    ) -> tuple[Measurement, Timeline | None]:
        """Simulate one decision; its measurement and its timeline as arrays (the content of
        ``evaluate(decision, schedule=True).schedule`` without building a record per kernel and
        transfer: many times faster on large graphs), or None for an illegal fusion.
        ``describe=False`` skips naming the ops of a fusion cycle in the reason (a search that
        only needs to know the decision is illegal; naming them costs more than a simulation).

        Raises:
            ValueError: a decision array of the wrong shape, type or range.
        """
        m, out = self._simulate(decision, describe)
        if out is None or out[0] == engine.STATUS_ILLEGAL_FUSION:
            return m, None
        kernel_of, roots, _, _, k_dev, k_start, k_end = out[6:13]
        t_op, _, t_dst, _, t_start, t_end = out[13:19]
        timeline = Timeline(
            kernel_of=np.array(kernel_of, dtype=np.int64),
            root=np.array(roots, dtype=np.int64),
            device=np.array(k_dev, dtype=np.int64),
            start=np.array(k_start, dtype=float),
            end=np.array(k_end, dtype=float),
            t_producer=np.array(t_op, dtype=np.int64),
            t_dst=np.array(t_dst, dtype=np.int64),
            t_start=np.array(t_start, dtype=float),
            t_end=np.array(t_end, dtype=float),
        )
        return m, timeline

    def _simulate(
        self, decision: Decision | None, describe: bool = True
    ) -> tuple[Measurement, tuple[Any, ...] | None]:
        """The measurement of one decision and the engine's raw output (views into the
        workspace, valid until the next simulation; None where the rules refused the fusion);
        ``describe=False``: a fusion cycle's reason does not name its ops."""
        placement, priority, fusion = self._decision_arrays(decision or Decision())
        if self.constraints is not None:
            broken = self.constraints.violation(placement)
            if broken:
                d = self.cluster.num_devices
                return Measurement(math.inf, np.zeros(d), np.zeros(d), 0.0, False, broken), None
        if fusion.any():
            rule, a, b = self.rules.violation(placement, fusion)
            if rule != RULE_OK:
                d = self.cluster.num_devices
                reason = self.rules.describe(rule, a, b)
                return Measurement(math.inf, np.zeros(d), np.zeros(d), 0.0, False, reason), None
        out = engine.simulate_core(
            self._engine_graph, placement, priority, fusion, tuple(self.workspace())
        )
        status, culprit, step, busy, peak_mem, moved = out[:6]
        kernel_of, roots, mptr, members, k_start = out[6], out[7], out[8], out[9], out[11]
        reason = ""
        if status == engine.STATUS_OOM:
            dev = self.cluster.devices[culprit]
            reason = (
                f"out of memory on device {culprit} ({dev.name}): peak {peak_mem[culprit] / 1e9:.3f} GB "
                f"> capacity {dev.memory / 1e9:.3f} GB"
            )
        elif status == engine.STATUS_ILLEGAL_FUSION:
            reason = (
                self._describe_fusion_cycle(kernel_of, roots, mptr, members, k_start)
                if describe
                else "illegal fusion: the fused kernels depend on each other in a cycle"
            )
        valid = status == engine.STATUS_OK
        if valid and not math.isfinite(step):  # costs so large that their sum overflows
            valid, reason = False, NOT_FINITE
        m = Measurement(
            step_time=float(step),
            busy_time=busy,
            peak_memory=peak_mem,
            bytes_moved=float(moved),
            valid=valid,
            reason=reason,
        )
        return m, out

    def evaluate_batch(
        self,
        placements: object | None = None,
        priorities: object | None = None,
        fusions: object | None = None,
    ) -> BatchResult:
        """Simulate ``B`` decisions at once; each argument is a ``(B, N)`` integer array or ``None``
        (the default for that decision). At least one must be given to fix ``B``.

        Raises:
            ValueError: arrays of different batch sizes, wrong shape or out-of-range entries.
        """
        n = self.num_ops
        given = [a for a in (placements, priorities, fusions) if a is not None]
        if not given:
            raise ValueError("evaluate_batch needs at least one of placements, priorities, fusions")
        first = np.asarray(given[0])
        batch = first.shape[0] if first.ndim == 2 else -1
        arrays = []
        for name, value, high in (
            ("placement", placements, self.cluster.num_devices),
            ("priority", priorities, MAX_PRIORITY),
            ("fusion", fusions, 2),
        ):
            if value is None:
                arrays.append(np.zeros((max(batch, 0), n), dtype=np.int64))
                continue
            arr = np.asarray(value)
            if arr.ndim != 2 or arr.shape != (batch, n):
                raise ValueError(
                    f"{name}s has shape {arr.shape}; expected ({max(batch, 0)}, {n}): "
                    "one row per decision, one column per op, same batch size for every array"
                )
            arrays.append(_check_array(name, arr.reshape(-1), batch * n, high).reshape(batch, n))
        placement, priority, fusion = arrays
        fused = np.flatnonzero(fusion.any(axis=1))
        illegal = fused[self.rules.violations(placement[fused], fusion[fused]) != RULE_OK]
        broken = np.zeros(batch, dtype=bool)
        if self.constraints is not None:
            broken = self.constraints.violations(placement)
            illegal = np.union1d(illegal, np.flatnonzero(broken))
        if len(illegal) == 0:
            status, _, step, busy, peak_mem, moved = engine.simulate_batch(
                self._engine_graph, placement, priority, fusion, tuple(self.workspace())
            )
        else:  # simulate the legal rows only; the others are illegal fusion (rules 2a-2d) or
            # break a placement constraint
            legal = np.setdiff1d(np.arange(batch), illegal)
            d = self.cluster.num_devices
            status = np.full(batch, engine.STATUS_ILLEGAL_FUSION, dtype=np.int64)
            step = np.full(batch, math.inf)
            busy, peak_mem, moved = np.zeros((batch, d)), np.zeros((batch, d)), np.zeros(batch)
            if len(legal):
                out = engine.simulate_batch(
                    self._engine_graph,
                    placement[legal],
                    priority[legal],
                    fusion[legal],
                    tuple(self.workspace()),
                )
                status[legal], step[legal], busy[legal] = out[0], out[2], out[3]
                peak_mem[legal], moved[legal] = out[4], out[5]
            status[broken] = STATUS_CONSTRAINT
        return BatchResult(
            step_time=step,
            valid=(status == engine.STATUS_OK) & np.isfinite(step),
            status=status,
            busy_time=busy,
            peak_memory=peak_mem,
            bytes_moved=moved,
        )

    def _describe_fusion_cycle(
        self,
        kernel_of: IntArray,
        roots: IntArray,
        mptr: IntArray,
        members: IntArray,
        k_start: FloatArray,
    ) -> str:
        """Name a kernel on a cycle of the contracted graph (rare path, so plain Python)."""
        import networkx as nx

        g = self.graph
        stuck = set(np.flatnonzero(np.isnan(k_start)).tolist())
        kg = nx.DiGraph()
        for s, d in zip(g.edge_src.tolist(), g.edge_dst.tolist(), strict=True):
            a, b = int(kernel_of[s]), int(kernel_of[d])
            if a != b and a in stuck and b in stuck:
                kg.add_edge(a, b)
        cycle = nx.find_cycle(kg)
        names = []
        for k, _ in cycle:
            ops = [g.op_names[i] for i in members[mptr[k] : mptr[k + 1]]]
            shown = ", ".join(repr(o) for o in ops[:4]) + (", ..." if len(ops) > 4 else "")
            names.append(f"[{shown}]")
        return (
            "illegal fusion: the fused kernels depend on each other in a cycle: "
            + " -> ".join(names + names[:1])
            + "; unset the fusion bit of an op that links these kernels through an op outside them"
        )


def pair_key(graph: CompGraph, cluster: Cluster) -> tuple[str, ...]:
    """Everything a simulated measurement of ``graph`` on ``cluster`` depends on: the two
    fingerprints, and what the simulator reads beyond them (the colocation groups where they
    constrain; the layers and forward part under ``contiguous: true``; the shapes under learned op
    times). Two pairs with equal keys measure alike under every :class:`Simulator`."""
    key: tuple[str, ...] = (graph.fingerprint, cluster.fingerprint)
    if cluster.model.enforce_colocation or cluster.contiguous:  # the groups (and, for the
        # blocks of contiguous: true, the layers and forward part) constrain: rule 0
        key += ("\0".join(graph.colocation),)
    if cluster.contiguous:
        key += ("\0".join(graph.layer), repr(graph.metadata.get("forward_ops")))
    if cluster.model.op_times == "learned":  # the op model reads the shapes: part of the key
        key += (graph.tensor_fingerprint,)
    return key


class Simulator:
    """The simulator as a :class:`~graphopt.typing.CostModel`, caching prepared graphs.

    Args:
        cache_size: how many prepared (graph, cluster) pairs to keep (least recently used evicted).
    """

    def __init__(self, cache_size: int = 64) -> None:
        self.cache_size = cache_size
        self._cache: LRUCache[tuple[str, ...], PreparedGraph] = LRUCache(maxsize=cache_size)

    def prepare(self, graph: CompGraph, cluster: Cluster) -> PreparedGraph:
        """The :class:`PreparedGraph` for this pair, from the cache when possible."""
        key = pair_key(graph, cluster)
        prepared = self._cache.get(key)
        if prepared is None:
            prepared = self._cache[key] = PreparedGraph(graph, cluster)
        return prepared

    def evaluate(
        self, graph: CompGraph, cluster: Cluster, decision: Decision, *, schedule: bool = False
    ) -> Measurement:
        """Simulate ``decision``; see :meth:`PreparedGraph.evaluate`."""
        return self.prepare(graph, cluster).evaluate(decision, schedule=schedule)


def simulate(
    graph: CompGraph,
    cluster: Cluster,
    decision: Decision | None = None,
    *,
    schedule: bool = False,
) -> Measurement:
    """One-off simulation (prepares the graph each call; use :class:`Simulator` in loops)."""
    return PreparedGraph(graph, cluster).evaluate(decision, schedule=schedule)
