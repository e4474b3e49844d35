"""Exact optima on small graphs: placement and schedule jointly with OR-tools CP-SAT (no fusion).

:func:`solve_exact` builds a constraint model of the simulator's rules (:mod:`graphopt.sim`,
rules 3 and 5-8 with every op its own kernel), minimises the makespan, turns the solution into a
:class:`~graphopt.typing.Decision` (placement, and priorities = the rank of each op's start time)
and re-simulates it. Meant for graphs of up to ~40 ops on 2-4 devices.

Model (times are integers in units of ``time_unit`` seconds):

- **Ops.** ``x[i, d]`` is 1 when op ``i`` runs on device ``d`` (exactly one per op); one optional
  interval ``[S_i, E_i)`` of the op's duration on ``d`` per device; intervals of one device do not
  overlap.
- **Transfers.** Op ``u`` on ``s`` sends its output once to each device ``t != s`` hosting one of
  its consumers: an optional interval ``[TS_ut, TE_ut)`` on link ``(s, t)``, present when
  ``x[u, s]`` and some consumer is on ``t``, of length ``latency + bytes / bandwidth``
  (:func:`graphopt.sim.links.transfer_time`) with ``bytes`` the largest edge from ``u`` to a
  consumer on ``t`` (a max over the consumers present), starting after ``E_u``; intervals of one
  link do not overlap. A consumer ``v`` starts after ``E_u`` when on ``u``'s device, else after
  the transfer to its device.
- **List scheduling** (``model="list"``, the default). The simulator does not run *any* schedule: a
  device never idles while a kernel is ready, and a link serves its queue first come first served
  (queue time = producer end, ties by producer index) without idling. Some optimal schedules of
  the classic model above wait on purpose, and no priority list reproduces them. So the list model
  adds, with ``R_v`` the ready time of ``v`` (its last input's arrival): the device is busy over
  every ``[R_j, S_j)`` (encoded as: an op starting later than its ready time, or later than the
  ready time of another op of its device that starts after it, starts exactly when an op of its
  device ends; by induction the device is then busy all along), and the same for link queues, plus
  FIFO order on every link. Every schedule of this model is a run of the simulator for
  ``priority = rank of start time``, and every run of the simulator is a schedule of the model,
  so its optimum is the best step time over all placements and priorities.
- **Relaxed** (``model="relaxed"``): the classic model only. Its optimum is a lower bound on the
  step time of every decision (with or without list scheduling), but re-simulating its decision
  may give more. (Times are bounded by the longest possible list schedule, the sum of all jobs;
  only with binding memory could a relaxed schedule that waits on purpose need more.)
- **Memory** (``memory=True``). Per device, a cumulative constraint of capacity
  ``memory - parameters`` over: each op's output from ``S_u`` until its last consumer ends (its own
  end when it has none), and each received copy from ``TS_ut`` until the last consumer on ``t``
  ends (rule 8). Bytes are integers: demands rounded up, capacity down (conservative, so a
  solution is never out of memory in the simulator). Left out when it cannot bind: when every
  device could hold all parameters, outputs and copies at once (``ExactResult.memory`` says which).
  ``memory=False`` ignores memory: the re-simulation then reports an OOM, if any.
- **Symmetry.** Interchangeable devices (equal specs and equal links to and from every other
  device, e.g. the two GPUs of ``hetero-cpu-2gpu``) are used in order: an op goes on the ``k``-th
  device of such a class only if an earlier op is on its ``(k - 1)``-th. Relabelling devices of a
  class changes no simulation, so some optimal solution always satisfies this.
- **Search aids** (change no optimum): the critical-path and work lower bounds on the integer
  durations; every device's load at most the makespan, when devices differ in speed (this took a
  20-op graph on ``hetero-cpu-2gpu`` from a 20% gap after 120 s to optimal in 4 s; on identical
  devices it made 40-op layered graphs, otherwise solved in 10-20 s, time out); all ops as one
  cumulative of capacity ``D``; the cheapest transfer time on every edge cut by the placement;
  and a hint: the best placer of :data:`~graphopt.baselines.placement.PLACERS` in topological
  order, replayed by the simulator's rules in integer time (:meth:`_Builder.replay`) so that the
  hint is an exact solution.

Rounding. Every duration (op on a device, transfer on a link) is rounded to the nearest unit and
at least 1 unit. The default ``time_unit`` is ``1e-8`` of a serial upper bound on the step time,
so the makespan ``objective * time_unit`` differs from the simulated step time of the same decision
by at most ``tolerance = time_unit * (N + (D - 1) * senders)`` (1 unit per op and per possible
transfer on the critical chain), unless two events of the simulation are closer than that and rounding swaps
them (rare: the re-simulation in ``ExactResult.measurement`` then shows the difference).

Status. ``"optimal"``: CP-SAT proved the objective optimal for the model, to within ``tolerance``
(its absolute gap limit, the precision the rounding allows anyway); ``"feasible"``: a solution
was found but the time limit came first (``bound`` is then the best proven lower bound);
``"infeasible"``: no decision fits in memory; ``"unknown"``: no solution (nor proof that none
exists) within the time limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphopt.baselines._costs import check_finite_times
from graphopt.baselines.placement import PLACERS
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.sim.links import transfer_time
from graphopt.typing import Decision, IntArray, Measurement

MODELS = ("list", "relaxed")
MAX_OPS = 64
"""Graphs above this size are refused by default (the model has O(N^2 D) constraints)."""


@dataclass(frozen=True)
class ExactResult:
    """The outcome of :func:`solve_exact`.

    Attributes:
        status: ``"optimal"``, ``"feasible"``, ``"infeasible"`` or ``"unknown"`` (module docstring).
        decision: placement and priorities of the best solution (``None`` without one).
        makespan: its makespan in the model, seconds (``inf`` without a solution).
        bound: CP-SAT's proven lower bound on the model's optimum, seconds (equals ``makespan``
            when optimal).
        measurement: the simulator's measurement of ``decision`` (``None`` without one).
        tolerance: seconds by which ``makespan`` and the simulated step time of the same decision
            may differ through rounding (module docstring).
        time_unit: seconds per integer time unit of the model.
        model: ``"list"`` or ``"relaxed"``.
        memory: ``"modelled"``, ``"cannot bind"`` or ``"ignored"``.
        wall_time: seconds spent in CP-SAT.
    """

    status: str
    decision: Decision | None
    makespan: float
    bound: float
    measurement: Measurement | None
    tolerance: float
    time_unit: float
    model: str
    memory: str
    wall_time: float

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"


def unmodelled_options(cluster: Cluster, *, memory: bool = True) -> list[str]:
    """The cluster's model options, as ``option: value``, that :func:`solve_exact`'s model does
    not follow: it queues transfers on direct links, one send per device, dispatches by
    priority, and (with ``memory``) charges received copies (:class:`~graphopt.typing.ClusterModel`)."""
    model = cluster.model
    out = []
    if not model.queued:
        out.append(f"contention: {cluster.contention}")
    if model.routed:
        out.append(f"route: {cluster.route}")
    if model.per_consumer:
        out.append(f"send: {cluster.send}")
    if model.fcfs:
        out.append(f"dispatch: {cluster.dispatch}")
    if memory and not model.charge_copies:
        out.append(f"copies: {cluster.copies}")
    return out


def solve_exact(
    graph: CompGraph,
    cluster: Cluster,
    *,
    model: str = "list",
    time_limit: float = 10.0,
    memory: bool = True,
    time_unit: float | None = None,
    num_workers: int = 1,
    seed: int = 0,
    max_ops: int = MAX_OPS,
) -> ExactResult:
    """Minimum step time over placements and schedules, no fusion (module docstring).

    Args:
        graph: the computation graph (at most ``max_ops`` ops).
        cluster: the devices and links.
        model: ``"list"`` (what the simulator can run: the optimum over decisions) or
            ``"relaxed"`` (any schedule: a lower bound).
        time_limit: CP-SAT wall-clock limit in seconds; the status says whether it was reached.
        memory: model device memory (when it can bind); ``False`` ignores it.
        time_unit: seconds per model time unit (default ``1e-8`` of a serial upper bound).
        num_workers: CP-SAT search threads. With 1 (the default) the search is deterministic for
            a given ``seed`` as long as the time limit is not reached; more threads are faster
            on large models but may return a different optimal decision from run to run.
        seed: CP-SAT random seed.
        max_ops: refuse larger graphs (the model grows as ``N^2 D``).

    Raises:
        ValueError: an unknown model, a graph above ``max_ops``, bad limits, op times whose sum
            overflows, or a cluster with ``contiguous: true`` or a model option the model does
            not follow (:func:`unmodelled_options`).
        ImportError: OR-tools is not installed.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose one of: {', '.join(MODELS)}")
    if graph.num_ops > max_ops:
        raise ValueError(
            f"graph {graph.name!r} has {graph.num_ops} ops; solve_exact is meant for graphs of at "
            f"most {max_ops} ops (raise max_ops= to try anyway, with a generous time_limit)"
        )
    if not time_limit > 0 or num_workers < 1:
        raise ValueError(
            f"need time_limit > 0 and num_workers >= 1, got {time_limit}, {num_workers}"
        )
    if cluster.contiguous:
        raise ValueError(
            f"solve_exact does not model contiguous stages, and cluster {cluster.name!r} demands "
            "them (contiguous: true); search with annealing, or set contiguous: false"
        )
    unmodelled = unmodelled_options(cluster, memory=memory)
    if unmodelled:
        raise ValueError(
            f"solve_exact models the default link and dispatch model only, and cluster "
            f"{cluster.name!r} sets {', '.join(unmodelled)}; search with annealing, or use "
            "the defaults"
        )
    try:
        from ortools.sat.python import cp_model
    except ImportError as e:  # pragma: no cover
        raise ImportError(
            'solve_exact needs OR-tools: pip install "ortools>=9.8" (a graphopt dependency)'
        ) from e
    prepared = PreparedGraph(graph, cluster)
    check_finite_times(graph, cluster, prepared.op_time)
    builder = _Builder(cp_model, prepared, model, memory, time_unit)
    builder.hint(np.asarray(_best_placer(graph, cluster, prepared).placement, dtype=np.int64))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.num_workers = int(num_workers)
    solver.parameters.random_seed = int(seed)
    solver.parameters.absolute_gap_limit = float(builder.num_jobs)  # = tolerance, in units
    start = time.perf_counter()
    code = solver.solve(builder.m)
    wall = time.perf_counter() - start
    status = {
        cp_model.OPTIMAL: "optimal",
        cp_model.FEASIBLE: "feasible",
        cp_model.INFEASIBLE: "infeasible",
    }.get(code, "unknown")
    unit = builder.unit
    tolerance = unit * builder.num_jobs
    if status not in ("optimal", "feasible"):
        bound = np.inf if status == "infeasible" else float(solver.best_objective_bound) * unit
        return ExactResult(
            status, None, np.inf, bound, None, tolerance, unit, model, builder.memory, wall
        )
    decision = builder.decision(solver)
    return ExactResult(
        status=status,
        decision=decision,
        makespan=float(solver.objective_value) * unit,
        bound=float(solver.best_objective_bound) * unit,
        measurement=prepared.evaluate(decision),
        tolerance=tolerance,
        time_unit=unit,
        model=model,
        memory=builder.memory,
        wall_time=wall,
    )


def _best_placer(graph: CompGraph, cluster: Cluster, prepared: PreparedGraph) -> Decision:
    """The fastest valid placement of :data:`~graphopt.baselines.placement.PLACERS` (topological
    order), to hint the solver with; all on device 0 when none is valid."""
    best, best_key = Decision(placement=np.zeros(graph.num_ops, dtype=np.int64)), (True, np.inf)
    for placer in PLACERS.values():
        try:
            decision = Decision(placement=np.asarray(placer(graph, cluster), dtype=np.int64))
        except (ValueError, ImportError):
            continue
        m = prepared.evaluate(decision)
        if (not m.valid, m.step_time) < best_key:
            best, best_key = decision, (not m.valid, m.step_time)
    return best


def _interchangeable(cluster: Cluster) -> list[list[int]]:
    """Classes (of two or more) of devices any two of which can swap labels without changing any
    simulation: equal specs, and equal links to and from every other device and between them."""
    bw, lat, num_dev = cluster.bandwidth, cluster.latency, cluster.num_devices
    spec = [
        (d.kind, d.peak_flops, d.mem_bandwidth, d.memory, d.launch_overhead)
        for d in cluster.devices
    ]

    def swappable(a: int, b: int) -> bool:
        others = [x for x in range(num_dev) if x not in (a, b)]
        return (
            spec[a] == spec[b]
            and all(m[a, b] == m[b, a] for m in (bw, lat))
            and all(m[a, x] == m[b, x] and m[x, a] == m[x, b] for m in (bw, lat) for x in others)
        )

    classes: list[list[int]] = []
    for d in range(num_dev):  # swappability is an equivalence relation (transpositions compose)
        home = next((c for c in classes if swappable(c[0], d)), None)
        if home is None:
            classes.append([d])
        else:
            home.append(d)
    return [c for c in classes if len(c) > 1]


def _ancestors(graph: CompGraph) -> list[int]:
    """Bit set of the ancestors of every op (Python ints: ``N`` is small here)."""
    anc = [0] * graph.num_ops
    for s, d in zip(graph.edge_src.tolist(), graph.edge_dst.tolist(), strict=True):
        anc[d] |= anc[s] | (1 << s)  # edges are sorted by source, so anc[s] is final here
    return anc


class _Builder:
    """Builds the CP-SAT model of :func:`solve_exact` and reads its solution back."""

    def __init__(
        self, cp: Any, prepared: PreparedGraph, model: str, memory: bool, unit: float | None
    ) -> None:
        self.m = cp.CpModel()
        self.prepared = prepared
        graph, cluster = prepared.graph, prepared.cluster
        n, num_dev = graph.num_ops, cluster.num_devices
        self.n, self.num_dev = n, num_dev
        self.succ: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self.pred: list[list[int]] = [[] for _ in range(n)]
        for s, d, b in zip(
            graph.edge_src.tolist(), graph.edge_dst.tolist(), graph.edge_bytes.tolist(), strict=True
        ):
            self.succ[s].append((d, b))
            self.pred[d].append(s)
        self.anc = _ancestors(graph)
        self.senders = [u for u in range(n) if self.succ[u]]
        # Durations in seconds, then in units (module docstring: rounding).
        op_time = prepared.op_time  # (N, D)
        comm = {
            (u, v, s, t): transfer_time(prepared.link_lat, prepared.link_bw, s, t, b)
            for u in self.senders
            for v, b in self.succ[u]
            for s, t in self._links()
        }
        worst_send = [max((comm[k] for k in comm if k[0] == u), default=0.0) for u in range(n)]
        serial = float(op_time.max(axis=1).sum()) + (num_dev - 1) * sum(worst_send)
        self.unit = float(unit) if unit is not None else max(serial, 1e-30) * 1e-8
        if not self.unit > 0:
            raise ValueError(f"time_unit must be > 0, got {unit}")
        self.p = np.maximum(np.rint(op_time / self.unit), 1).astype(np.int64)
        self.c = {k: max(int(round(v / self.unit)), 1) for k, v in comm.items()}
        # A list schedule keeps some device or link busy until it ends, so the makespan is at most
        # the sum of all jobs; the relaxed model's optimum is no larger.
        self.horizon = int(self.p.max(axis=1).sum()) + (num_dev - 1) * sum(
            max((self.c[k] for k in self.c if k[0] == u), default=0) for u in range(n)
        )
        self.num_jobs = n + len(self.senders) * (num_dev - 1)
        self._same: dict[tuple[int, int], Any] = {}
        self._ops()
        self._constraints()
        self._transfers()
        if model == "list":
            self._list_scheduling()
        self.memory = self._memory() if memory else "ignored"
        self._symmetry()
        self._objective()

    # ------------------------------------------------------------------ helpers
    def _links(self) -> list[tuple[int, int]]:
        return [(s, t) for s in range(self.num_dev) for t in range(self.num_dev) if s != t]

    def _time(self, name: str) -> Any:
        return self.m.new_int_var(0, self.horizon, name)

    def _related(self, a: int, b: int) -> bool:
        """Whether one of ``a``, ``b`` is an ancestor of the other."""
        return bool((self.anc[a] >> b) & 1 or (self.anc[b] >> a) & 1)

    def same_device(self, a: int, b: int) -> Any:
        """Literal: ops ``a`` and ``b`` are on the same device (created on first use)."""
        key = (min(a, b), max(a, b))
        lit = self._same.get(key)
        if lit is None:
            lit = self.m.new_bool_var(f"same_{key[0]}_{key[1]}")
            for d in range(self.num_dev):
                xa, xb = self.x[key[0]][d], self.x[key[1]][d]
                self.m.add_bool_or([xa.Not(), xb.Not(), lit])
                self.m.add_bool_or([lit.Not(), xa.Not(), xb])
            self._same[key] = lit
        return lit

    # ------------------------------------------------------------------ constraints
    def _ops(self) -> None:
        m, n, num_dev = self.m, self.n, self.num_dev
        self.x = [[m.new_bool_var(f"x_{i}_{d}") for d in range(num_dev)] for i in range(n)]
        self.S = [self._time(f"S_{i}") for i in range(n)]
        self.E = [self._time(f"E_{i}") for i in range(n)]
        per_device: list[list[Any]] = [[] for _ in range(num_dev)]
        for i in range(n):
            m.add_exactly_one(self.x[i])
            m.add(
                self.E[i]
                == self.S[i] + sum(int(self.p[i, d]) * self.x[i][d] for d in range(num_dev))
            )
            for d in range(num_dev):
                per_device[d].append(
                    m.new_optional_fixed_size_interval_var(
                        self.S[i], int(self.p[i, d]), self.x[i][d], f"op_{i}_{d}"
                    )
                )
            for u in self.pred[i]:
                m.add(self.S[i] >= self.E[u])
        for intervals in per_device:
            m.add_no_overlap(intervals)

    def _transfers(self) -> None:
        m, num_dev = self.m, self.num_dev
        self.cons_on: dict[tuple[int, int], Any] = {}
        self.pres: dict[tuple[int, int], Any] = {}
        self.TS: dict[tuple[int, int], Any] = {}
        self.TE: dict[tuple[int, int], Any] = {}
        per_link: dict[tuple[int, int], list[Any]] = {st: [] for st in self._links()}
        for u in self.senders:
            for t in range(num_dev):
                cons = m.new_bool_var(f"cons_{u}_{t}")
                m.add_max_equality(cons, [self.x[v][t] for v, _ in self.succ[u]])
                pres = m.new_bool_var(f"send_{u}_{t}")
                m.add_implication(pres, cons)
                m.add_implication(pres, self.x[u][t].Not())
                m.add_bool_or([cons.Not(), self.x[u][t], pres])
                self.cons_on[u, t], self.pres[u, t] = cons, pres
                if num_dev == 1:
                    continue
                ts, te = self._time(f"TS_{u}_{t}"), self._time(f"TE_{u}_{t}")
                self.TS[u, t], self.TE[u, t] = ts, te
                m.add(ts >= self.E[u]).only_enforce_if(pres)
                for s in range(num_dev):
                    if s == t:
                        continue
                    on_link = m.new_bool_var(f"link_{u}_{s}_{t}")
                    m.add_implication(on_link, self.x[u][s])
                    m.add_implication(on_link, cons)
                    m.add_bool_or([self.x[u][s].Not(), cons.Not(), on_link])
                    sizes = {self.c[u, v, s, t] for v, _ in self.succ[u]}
                    if len(sizes) == 1:
                        size: Any = sizes.pop()
                    else:
                        size = m.new_int_var(0, max(sizes), f"tsize_{u}_{s}_{t}")
                        m.add_max_equality(
                            size, [self.c[u, v, s, t] * self.x[v][t] for v, _ in self.succ[u]]
                        )
                    per_link[s, t].append(
                        m.new_optional_interval_var(ts, size, te, on_link, f"tr_{u}_{s}_{t}")
                    )
                for v, _ in self.succ[u]:
                    m.add(self.S[v] >= te).only_enforce_if([self.x[v][t], self.x[u][t].Not()])
        for intervals in per_link.values():
            m.add_no_overlap(intervals)

    def _list_scheduling(self) -> None:
        """Non-delay devices, FIFO non-delay links (module docstring)."""
        m, n, num_dev = self.m, self.n, self.num_dev
        ready = []
        for v in range(n):
            if not self.pred[v]:
                ready.append(0)
                continue
            arrivals = []
            for u in self.pred[v]:
                arr = self._time(f"arr_{u}_{v}")
                for t in range(num_dev):
                    m.add(arr == self.E[u]).only_enforce_if([self.x[v][t], self.x[u][t]])
                    if num_dev > 1:
                        m.add(arr == self.TE[u, t]).only_enforce_if(
                            [self.x[v][t], self.x[u][t].Not()]
                        )
                arrivals.append(arr)
            r = self._time(f"R_{v}")
            m.add_max_equality(r, arrivals)
            m.add(self.S[v] >= r)
            ready.append(r)
        # Devices: tight[x] = "an op of x's device ends exactly at S_x".
        order: dict[tuple[int, int], Any] = {}  # (a, b), a < b: S_a < S_b
        for x in range(n):
            tight = m.new_bool_var(f"tight_{x}")
            ends = []
            for i in range(n):
                if i == x or (self.anc[i] >> x) & 1:  # i == x, or i descends from x
                    continue
                b = m.new_bool_var(f"abut_{i}_{x}")
                m.add(self.E[i] == self.S[x]).only_enforce_if(b)
                m.add_implication(b, self.same_device(i, x))
                ends.append(b)
            m.add_bool_or([*ends, tight.Not()])
            m.add(self.S[x] <= ready[x]).only_enforce_if(tight.Not())
            for j in range(n):
                if j == x or self._related(j, x):
                    continue
                key = (min(j, x), max(j, x))
                if key not in order:
                    o = m.new_bool_var(f"before_{key[0]}_{key[1]}")
                    m.add(self.S[key[0]] < self.S[key[1]]).only_enforce_if(o)
                    m.add(self.S[key[0]] >= self.S[key[1]]).only_enforce_if(o.Not())
                    order[key] = o
                x_first = order[key] if x < j else order[key].Not()  # S_x < S_j
                waiting = m.new_bool_var(f"waits_{j}_{x}")  # R_j < S_x
                m.add(ready[j] >= self.S[x]).only_enforce_if(waiting.Not())
                m.add_bool_or([waiting.Not(), x_first.Not(), self.same_device(j, x).Not(), tight])
        if num_dev == 1:
            return
        # Links: FIFO by (producer end, producer index), no idling while a transfer is queued.
        for t in range(num_dev):
            senders = self.senders
            for a_pos, u in enumerate(senders):
                for w in senders[a_pos + 1 :]:  # u < w
                    both = [self.pres[u, t], self.pres[w, t], self.same_device(u, w)]
                    if (self.anc[w] >> u) & 1:  # u before w: E_u < E_w
                        m.add(self.TE[u, t] <= self.TS[w, t]).only_enforce_if(both)
                        continue
                    q = m.new_bool_var(f"fifo_{u}_{w}_{t}")  # E_u <= E_w: u queued first
                    m.add(self.E[u] <= self.E[w]).only_enforce_if(q)
                    m.add(self.E[u] > self.E[w]).only_enforce_if(q.Not())
                    m.add(self.TE[u, t] <= self.TS[w, t]).only_enforce_if([*both, q])
                    m.add(self.TE[w, t] <= self.TS[u, t]).only_enforce_if([*both, q.Not()])
            for u in senders:
                tight = m.new_bool_var(f"ltight_{u}_{t}")
                m.add(self.TS[u, t] <= self.E[u]).only_enforce_if([self.pres[u, t], tight.Not()])
                ends = []
                for w in senders:
                    if w == u or (self.anc[w] >> u) & 1:
                        continue
                    b = m.new_bool_var(f"labut_{w}_{u}_{t}")
                    m.add(self.TE[w, t] == self.TS[u, t]).only_enforce_if(b)
                    m.add_implication(b, self.pres[w, t])
                    m.add_implication(b, self.same_device(u, w))
                    ends.append(b)
                m.add_bool_or([*ends, tight.Not()])

    def _memory(self) -> str:
        """Cumulative memory per device (module docstring); returns the memory status."""
        m, n, num_dev = self.m, self.n, self.num_dev
        graph, cap = self.prepared.graph, self.prepared.capacity
        params = np.ceil(graph.param_bytes).astype(np.int64)
        out = np.ceil(graph.output_bytes).astype(np.int64)
        copy = [int(np.ceil(max((b for _, b in self.succ[u]), default=0.0))) for u in range(n)]
        capacity = np.floor(np.minimum(cap, 2**62)).astype(np.int64)
        if int(params.sum() + out.sum() + sum(copy)) <= int(capacity.min()):
            return "cannot bind"
        last = []
        for u in range(n):
            if not self.succ[u]:
                last.append(self.E[u])
                continue
            lu = self._time(f"last_{u}")
            m.add_max_equality(lu, [self.E[v] for v, _ in self.succ[u]])
            last.append(lu)
        for d in range(num_dev):
            intervals, demands = [], []
            for u in range(n):
                size = m.new_int_var(0, self.horizon, f"live_{u}_{d}")
                intervals.append(
                    m.new_optional_interval_var(
                        self.S[u], size, last[u], self.x[u][d], f"act_{u}_{d}"
                    )
                )
                demands.append(int(out[u]))
                if num_dev == 1 or u not in self.senders:
                    continue
                ends = []
                for v, _ in self.succ[u]:
                    e = self._time(f"end_{v}_on_{d}")
                    m.add(e == self.E[v]).only_enforce_if(self.x[v][d])
                    m.add(e == 0).only_enforce_if(self.x[v][d].Not())
                    ends.append(e)
                copy_end = self._time(f"copy_end_{u}_{d}")
                m.add_max_equality(copy_end, ends)
                nbytes = m.new_int_var(0, copy[u], f"copy_bytes_{u}_{d}")
                m.add_max_equality(
                    nbytes, [int(np.ceil(b)) * self.x[v][d] for v, b in self.succ[u]]
                )
                size = m.new_int_var(0, self.horizon, f"copy_live_{u}_{d}")
                intervals.append(
                    m.new_optional_interval_var(
                        self.TS[u, d], size, copy_end, self.pres[u, d], f"copy_{u}_{d}"
                    )
                )
                demands.append(nbytes)
            free = m.new_int_var(0, int(capacity[d]), f"free_{d}")
            m.add(free == int(capacity[d]) - sum(int(params[u]) * self.x[u][d] for u in range(n)))
            m.add_cumulative(intervals, demands, free)
        return "modelled"

    def _constraints(self) -> None:
        """The placement constraints (:mod:`graphopt.constraints`): ``x[i, d] = 0`` where op
        ``i`` may not run on ``d``; under ``colocation: enforce`` the ops of a group share
        their ``x`` row. Interchangeable devices (:meth:`_symmetry`) have the same kind, so the
        constraints keep them interchangeable."""
        rules = self.prepared.constraints
        if rules is None:
            return
        if rules.allowed is not None:
            for i, d in np.argwhere(~rules.allowed).tolist():
                self.m.add(self.x[i][d] == 0)
        if rules.group is not None:
            for g in range(len(rules.group_names)):
                members = np.flatnonzero(rules.group == g).tolist()
                for a, b in zip(members, members[1:], strict=False):
                    for d in range(self.num_dev):
                        self.m.add(self.x[a][d] == self.x[b][d])

    def _symmetry(self) -> None:
        """Use interchangeable devices in order (module docstring, Symmetry)."""
        self.classes = _interchangeable(self.prepared.cluster)
        for members in self.classes:
            for prev, d in zip(members, members[1:], strict=False):
                for i in range(self.n):
                    earlier = [self.x[j][prev] for j in range(i)]
                    self.m.add_bool_or([*earlier, self.x[i][d].Not()])

    def _objective(self) -> None:
        """Minimise the makespan, with redundant constraints that only help the search prove
        bounds: the critical path and the work bound of :mod:`graphopt.sim.bounds`, computed on
        the integer durations; each device's load (devices of different speeds only); all ops as
        one cumulative of capacity ``D``; and the cheapest transfer time on every edge whose ends
        are on different devices."""
        m, n = self.m, self.n
        self.makespan = self._time("makespan")
        m.add_max_equality(self.makespan, self.E)
        fastest = self.p.min(axis=1)
        path = [0] * n
        for v in range(n):
            path[v] = int(fastest[v]) + max((path[u] for u in self.pred[v]), default=0)
        work = -(-int(fastest.sum()) // self.num_dev)  # ceil
        m.add(self.makespan >= max(max(path, default=0), work))
        if not np.all(self.p == self.p[:, :1]):  # devices of different speeds: their loads
            for d in range(self.num_dev):
                m.add(sum(int(self.p[i, d]) * self.x[i][d] for i in range(n)) <= self.makespan)
        durations = []
        for i in range(n):
            size = m.new_int_var(int(fastest[i]), int(self.p[i].max()), f"dur_{i}")
            m.add(size == self.E[i] - self.S[i])
            durations.append(m.new_interval_var(self.S[i], size, self.E[i], f"any_{i}"))
        m.add_cumulative(durations, [1] * n, self.num_dev)
        if self.num_dev > 1:
            for u in self.senders:
                cheapest = min(self.c[k] for k in self.c if k[0] == u)
                for v, _ in self.succ[u]:
                    apart = self.same_device(u, v).Not()
                    m.add(self.S[v] >= self.E[u] + cheapest).only_enforce_if(apart)
        m.minimize(self.makespan)

    def hint(self, placement: IntArray, priority: IntArray | None = None) -> None:
        """Hint CP-SAT with a complete solution: ``placement`` and ``priority`` (default:
        topological order) replayed in integer time by :meth:`replay`, so that every hinted value
        satisfies the model (a hint rounded from the simulator's float times would not, and on
        40 ops CP-SAT then found no solution at all in 120 s)."""
        if priority is None:
            priority = np.arange(self.n, dtype=np.int64)
        placement = np.array(placement, dtype=np.int64)
        for members in self.classes:  # relabel each class in order of first use (symmetry rule)
            used = [int(d) for d in dict.fromkeys(placement.tolist()) if d in members]
            order = used + [d for d in members if d not in used]
            mapping = dict(zip(order, members, strict=True))
            placement = np.array([mapping.get(int(d), int(d)) for d in placement], dtype=np.int64)
        start, end, sends = self.replay(placement, priority)
        for i in range(self.n):
            for d in range(self.num_dev):
                self.m.add_hint(self.x[i][d], int(placement[i] == d))
            self.m.add_hint(self.S[i], start[i])
            self.m.add_hint(self.E[i], end[i])
        for (u, t), (ts, te) in sends.items():
            self.m.add_hint(self.TS[u, t], ts)
            self.m.add_hint(self.TE[u, t], te)

    def replay(
        self, placement: IntArray, priority: IntArray
    ) -> tuple[list[int], list[int], dict[tuple[int, int], tuple[int, int]]]:
        """The simulator's rules 5-7 (no fusion) in the model's integer durations: start and end
        of every op, and ``(u, t) -> (start, end)`` of every transfer."""
        import heapq

        n, num_dev = self.n, self.num_dev
        dev = [int(d) for d in placement]
        need = [len(self.pred[v]) for v in range(n)]
        ready: list[list[tuple[int, int]]] = [[] for _ in range(num_dev)]
        for v in range(n):
            if need[v] == 0:
                heapq.heappush(ready[dev[v]], (int(priority[v]), v))
        queue: dict[tuple[int, int], list[tuple[int, int]]] = {st: [] for st in self._links()}
        busy: dict[object, bool] = {}
        events: list[tuple[int, int, int, int]] = []  # (end, kind 0 op / 1 transfer, id, dst)
        start, end = [0] * n, [0] * n
        sends: dict[tuple[int, int], tuple[int, int]] = {}
        now = 0
        while True:
            for d in range(num_dev):  # dispatch at `now`
                if not busy.get(d) and ready[d]:
                    _, v = heapq.heappop(ready[d])
                    start[v], end[v] = now, now + int(self.p[v, d])
                    busy[d] = True
                    heapq.heappush(events, (end[v], 0, v, d))
            for (s, t), fifo in queue.items():
                if not busy.get((s, t)) and fifo:
                    _, u = fifo.pop(0)
                    size = max(self.c[u, v, s, t] for v, _ in self.succ[u] if dev[v] == t)
                    sends[u, t] = (now, now + size)
                    busy[s, t] = True
                    heapq.heappush(events, (now + size, 1, u, t))
            if not events:
                return start, end, sends
            now = events[0][0]
            queued = []
            while events and events[0][0] == now:
                _, kind, u, d = heapq.heappop(events)
                busy[d if kind == 0 else (dev[u], d)] = False
                for v, _ in self.succ[u]:
                    if dev[v] == d:  # local consumers of an op; consumers on a transfer's dst
                        need[v] -= 1
                        if need[v] == 0:
                            heapq.heappush(ready[d], (int(priority[v]), v))
                if kind == 0:
                    queued += [(t, u) for t in sorted({dev[v] for v, _ in self.succ[u]} - {d})]
            for t, u in sorted(queued, key=lambda tu: tu[1]):  # same instant: by producer
                queue[dev[u], t].append((now, u))

    # ------------------------------------------------------------------ solution
    def decision(self, solver: Any) -> Decision:
        """Placement from ``x``; priority = rank of ``(S_i, i)`` (lowest starts first)."""
        placement = np.array(
            [
                next(d for d in range(self.num_dev) if solver.boolean_value(self.x[i][d]))
                for i in range(self.n)
            ],
            dtype=np.int64,
        )
        starts = [solver.value(s) for s in self.S]
        priority: IntArray = np.empty(self.n, dtype=np.int64)
        priority[sorted(range(self.n), key=lambda i: (starts[i], i))] = np.arange(self.n)
        return Decision(placement=placement, priority=priority)
