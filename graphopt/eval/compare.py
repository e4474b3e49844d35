"""Every method on one graph: heuristics, search at a budget, the exact optimum, bounds, a policy.

This is the table behind ``graphopt baselines`` and ``graphopt eval``. The heuristic rows are the
task's best-heuristic chain (:mod:`graphopt.baselines.staged`): every placer for placement; the
best placement with every scheduler (``best+NAME``) for scheduling; those and every fuser of the
best schedule (``best+NAME``) for fusion; all three stages for joint.

Search (random search, simulated annealing) runs at ``budget`` simulator evaluations for the task;
for placement also ``decoder-search@K``, the search through the placement decoder from zero
outputs anchored on the best heuristic (:func:`graphopt.decoders.search.search_placements`: the
search of ``graphopt optimize``, which needs no network).
For placement, ``estimate_budget > 0`` adds ``estimate-search@K``: hill climbing from the best
heuristic on the analytic estimate (:mod:`graphopt.baselines.estimate_search`, ``K`` estimates, no
simulation) whose result is simulated once and kept only if faster than its start: the baseline
of ``graphopt eval --mode plan:K`` (the same search with the policy's proposals).
Exact (CP-SAT over placement and schedule, no fusion) runs on small graphs (``<= exact_max_ops``
ops, ``<= 4`` devices, the default link and dispatch model: no row on a cluster that sets an
option CP-SAT's model does not follow, :func:`~graphopt.baselines.exact.unmodelled_options`) of
the placement, scheduling and joint tasks. For placement its proven
optimum is the task's optimum, for scheduling (placement fixed by the best heuristic) a bound on it:
the row ``optimum``, the reference of the gaps. Fusion can beat it, so for joint it is only the best
decision *without fusion*: the row ``optimum (no fusion)``, never a reference. The lower bound is
valid for the task: :func:`~graphopt.sim.lower_bounds` without fusion for placement and scheduling,
:func:`~graphopt.sim.bounds.any_fusion_lower_bounds` (any fusion) for fusion and joint. So no valid
result of a task is below its lower bound, nor below its ``optimum`` (up to CP-SAT's rounding
tolerance, :mod:`graphopt.baselines.exact`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from graphopt.baselines.estimate_search import estimate_search
from graphopt.baselines.exact import solve_exact, unmodelled_options
from graphopt.baselines.search import check_budget, random_search, simulated_annealing
from graphopt.baselines.staged import measure_chain
from graphopt.decoders.search import search_placements
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import Simulator, lower_bounds
from graphopt.sim.bounds import any_fusion_lower_bounds
from graphopt.tasks import ONE_SHOT_TASKS, get_task
from graphopt.typing import CostModel, Decision


@dataclass(frozen=True)
class MethodResult:
    """One method's outcome on one graph."""

    method: str
    kind: str
    """``heuristic``, ``search``, ``exact`` (CP-SAT; named ``optimum`` only when it is the task's
    proven optimum) or ``policy``."""
    step_time: float
    valid: bool
    reason: str
    wall_seconds: float
    evaluations: int
    decision: Decision | None = field(default=None, repr=False, compare=False)
    """The decision behind the row (``None`` where the method gave none); not in :meth:`to_dict`
    of the comparison: :mod:`graphopt.decisions.files` saves it."""
    decision_file: str | None = None
    """Where the decision was saved (relative to the ``--save-decisions`` directory), if it was."""


@dataclass
class GraphComparison:
    """All methods on one graph, with the reference points (each valid for the task: no valid
    result of the task is below them)."""

    graph: str
    num_ops: int
    task: str
    cluster: str = ""
    """The name of the cluster the graph ran on."""
    results: list[MethodResult] = field(default_factory=list)
    single_device_time: float = math.nan
    lower_bound: float = math.nan
    """Seconds; for fusion and joint a bound under any fusion (see the module docstring)."""
    optimum: float | None = None
    """The task's proven optimum; None when not proven, not run, or the task decides fusion."""
    optimum_status: str = ""
    """CP-SAT's status for the task's optimum (empty when ``optimum`` is not computed)."""

    @property
    def best_heuristic(self) -> MethodResult | None:
        valid = [r for r in self.results if r.kind == "heuristic" and r.valid]
        return min(valid, key=lambda r: r.step_time) if valid else None

    def speedup_over_best_heuristic(self, method: str) -> float:
        """Best heuristic's step time over ``method``'s (0 when the method's decision is invalid)."""
        best = self.best_heuristic
        r = next((r for r in self.results if r.method == method), None)
        if best is None or r is None or not r.valid or r.step_time <= 0:
            return 0.0
        return best.step_time / r.step_time

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, results=[]))
        d["results"] = [asdict(replace(r, decision=None)) for r in self.results]
        for row in d["results"]:
            del row["decision"]
        best = self.best_heuristic
        d["best_heuristic"] = None if best is None else best.method
        return d


def heuristics(
    graph: CompGraph, cluster: Cluster, task: str, cost_model: CostModel
) -> tuple[list[MethodResult], Decision, MethodResult]:
    """Every heuristic of ``task``'s chain (:mod:`graphopt.baselines.staged`) as a result row,
    the best decision and its row. For joint, every stage's rows; for scheduling and fusion those
    of the stages the task decides (the placement stage only supplies their start)."""
    chain, score, best = measure_chain(graph, cluster, task, cost_model)
    shown = chain.stages if task in ("placement", "joint") else chain.stages[1:]
    rows: list[MethodResult] = []
    best_row: MethodResult | None = None
    for stage in shown:
        for c in stage:
            if c.decision is None:
                row = MethodResult(
                    c.method, "heuristic", math.inf, False, c.error, c.wall_seconds, 0
                )
            else:
                m = score.of(c)
                row = MethodResult(
                    c.method,
                    "heuristic",
                    m.step_time,
                    m.valid,
                    m.reason,
                    c.wall_seconds,
                    1,
                    c.decision,
                )
            rows.append(row)
            if c is best:
                best_row = row
    assert best_row is not None and best.decision is not None
    return rows, best.decision, best_row


def compare_on_graph(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    *,
    budget: int = 0,
    seed: int = 0,
    num_priorities: int = 8,
    exact_max_ops: int = 40,
    exact_time_limit: float = 10.0,
    policy: Callable[[], tuple[str, Decision, int]] | None = None,
    sim: Simulator | None = None,
    estimate_budget: int = 0,
) -> GraphComparison:
    """All methods on ``graph`` for ``task`` (see the module docstring).

    Args:
        budget: simulator evaluations for random search and simulated annealing (0: skip them).
        estimate_budget: analytic estimates for ``estimate-search`` (placement only; 0: skip it).
        policy: optional; returns ``(method name, decision, evaluations used)``.

    Raises:
        InvalidArgument: a budget that is not an integer >= 0.
    """
    check_budget(budget)
    check_budget(estimate_budget, "estimate_budget")
    sim = sim or Simulator()
    out = GraphComparison(graph=graph.name, num_ops=graph.num_ops, task=task, cluster=cluster.name)
    out.single_device_time = sim.evaluate(graph, cluster, Decision()).step_time
    fuses = get_task(task, ONE_SHOT_TASKS).decides_fusion
    bounds = any_fusion_lower_bounds if fuses else lower_bounds
    out.lower_bound = bounds(graph, cluster).best
    results, best, known = heuristics(graph, cluster, task, sim)  # known: best's result row
    out.results.extend(results)
    if budget > 0:
        for name, search in (("random-search", random_search), ("annealing", simulated_annealing)):
            start = time.perf_counter()
            res = search(
                graph, cluster, task, budget, seed, start=best, num_priorities=num_priorities
            )
            m = res.measurement
            out.results.append(
                MethodResult(
                    f"{name}@{budget}",
                    "search",
                    m.step_time,
                    m.valid,
                    m.reason,
                    time.perf_counter() - start,
                    res.evaluations,
                    res.decision,
                )
            )
    if budget > 0 and task == "placement":
        out.results.append(decoder_search_row(graph, cluster, best, budget, seed, sim))
    if estimate_budget > 0 and task == "placement":
        out.results.append(
            estimate_search_row(graph, cluster, best, known, estimate_budget, seed, sim)
        )
    exact_fits = graph.num_ops <= exact_max_ops and cluster.num_devices <= 4
    # CP-SAT's model is the default link and dispatch model: no row where the cluster sets another
    if task != "fusion" and exact_fits and not unmodelled_options(cluster):
        ex = solve_exact(graph, cluster, time_limit=exact_time_limit, seed=seed)
        if ex.measurement is not None:
            label = "optimum" if ex.optimal else f"cp-sat ({ex.status})"
            if fuses:  # the best without fusion: neither optimum nor bound here
                label = "optimum (no fusion)" if ex.optimal else f"cp-sat, no fusion ({ex.status})"
            else:
                out.optimum = ex.measurement.step_time if ex.optimal else None
                out.optimum_status = ex.status
            out.results.append(
                MethodResult(
                    label,
                    "exact",
                    ex.measurement.step_time,
                    ex.measurement.valid,
                    ex.measurement.reason,
                    ex.wall_time,
                    0,
                    ex.decision,
                )
            )
    if policy is not None:
        start = time.perf_counter()
        name, decision, evaluations = policy()
        wall = time.perf_counter() - start
        m = sim.evaluate(graph, cluster, decision)
        out.results.append(
            MethodResult(
                name, "policy", m.step_time, m.valid, m.reason, wall, evaluations, decision
            )
        )
    return out


def decoder_search_row(
    graph: CompGraph, cluster: Cluster, start: Decision, budget: int, seed: int, sim: Simulator
) -> MethodResult:
    """``decoder-search@budget``: the search through the placement decoder from zero outputs,
    anchored on ``start`` (:func:`graphopt.decoders.search.search_placements`), ``budget``
    simulator calls, its start's included."""
    began = time.perf_counter()
    found = search_placements(graph, cluster, start, budget, seed=seed, cost_model=sim)
    m = found.measurement
    return MethodResult(
        f"decoder-search@{budget}",
        "search",
        m.step_time,
        m.valid,
        m.reason,
        time.perf_counter() - began,
        found.calls,
        found.decision,
    )


def estimate_search_row(
    graph: CompGraph,
    cluster: Cluster,
    start: Decision,
    known: MethodResult,
    budget: int,
    seed: int,
    sim: Simulator,
) -> MethodResult:
    """``estimate-search@budget`` from ``start`` (measured as ``known``): its result is simulated
    once and kept only if better by ``(invalid, step time)``."""
    began = time.perf_counter()
    found = estimate_search(graph, cluster, start.placement, budget, seed=seed)  # type: ignore[arg-type]
    decision = Decision(placement=found.placement)
    m = sim.evaluate(graph, cluster, decision)
    step, valid, reason = m.step_time, m.valid, m.reason
    if (not valid, step) >= (not known.valid, known.step_time):
        step, valid, reason = known.step_time, known.valid, known.reason  # keep the start
        decision = start
    return MethodResult(
        f"estimate-search@{budget}",
        "search",
        step,
        valid,
        reason,
        time.perf_counter() - began,
        1,
        decision,
    )


def geomean_speedup(values: list[float]) -> float:
    """Geometric mean of speed-ups; 0 when there are none or one is 0 (an invalid decision)."""
    if not values or min(values) <= 0:
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_speedups(comparisons: list[GraphComparison]) -> dict[str, float]:
    """Per method, the geometric mean over graphs of its speed-up over the best heuristic (an
    invalid decision on any graph makes the method's geomean 0)."""
    methods: list[str] = []
    for c in comparisons:
        for r in c.results:
            if r.method not in methods:
                methods.append(r.method)
    return {
        method: geomean_speedup(
            [
                c.speedup_over_best_heuristic(method)
                for c in comparisons
                if any(r.method == method for r in c.results)
            ]
        )
        for method in methods
    }


def stage_decisions(
    comparisons: list[GraphComparison],
    pairs: list[tuple[Any, Any]],
    saved: Any,
    *,
    task: str,
    seed: int,
) -> int:
    """Save the decision of every row of ``comparisons`` (one per ``(graph, cluster)`` of
    ``pairs``, in order) that has one into ``saved`` (a
    :class:`graphopt.decisions.files.DecisionDir`) and name its file in the row
    (``decision_file``); returns how many. The files are staged: ``saved.write_index`` moves
    them into place, with the command's other files, which name them."""
    from dataclasses import replace

    count = 0
    for comparison, (graph, cluster) in zip(comparisons, pairs, strict=True):
        rows = []
        for r in comparison.results:
            if r.decision is not None:
                name = saved.save(graph, cluster, r.method, r.decision, r, task=task, seed=seed)
                r = replace(r, decision_file=name)
                count += 1
            rows.append(r)
        comparison.results = rows
    return count
