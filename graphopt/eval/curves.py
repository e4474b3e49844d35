"""Anytime curves: the best step time each method finds after K simulator calls and after S seconds.

The comparison users decide by (``graphopt eval RUN --curve``, ``graphopt baselines --curve``):
for every graph and method, the speed-up over the graph's best heuristic reached

- after ``K`` simulator calls, ``K`` in :data:`~graphopt.eval.budgets.CALLS` by default (0, 16,
  64, 256, 1024, 4096);
- after ``S`` seconds of wall time on this machine, ``S`` in
  :data:`~graphopt.eval.budgets.SECONDS` (1, 10, 60).

Methods, each run afresh at every budget (annealing's temperature schedule depends on its budget,
so a prefix of a long run is not the short run):

- ``best heuristic``: the task's chain (:mod:`graphopt.baselines.staged`); the reference (1.0),
  at every budget, its calls being the heuristics it simulated;
- ``random-search``, ``annealing``: from the best heuristic, ``K`` calls
  (:mod:`graphopt.baselines.search`); at ``K = 0`` their start;
- ``estimate-search`` (placement): ``K`` analytic estimates from the best heuristic, then one
  simulator call (:mod:`graphopt.baselines.estimate_search`; kept only if faster than the start);
- ``decoder-search`` (placement): ``K`` calls of the search through the placement decoder from
  zero outputs anchored on the best heuristic
  (:func:`graphopt.decoders.search.search_placements`, the search of ``graphopt optimize``); at
  ``K = 0`` its start;
- with a policy (``graphopt eval``): ``greedy`` (one call, the same at every budget) and, per
  ``K >= 1``, ``sample:K``, ``finetune:K`` (``K <= finetune_max``: fine-tuning is the slow one)
  and, for placement, ``plan:K`` (:mod:`policies.rollout`).

Seconds: a method with a budget is run at the call budget its largest call-budget run achieves
per second times ``S`` (at least 1), and the point holds that run's result with its own
measured seconds; a method without a budget (the heuristic chain, greedy) holds its one result.
A point whose run took longer than ``S`` seconds (rates drift) still shows what that run found,
with its seconds: the table says how long it really took.

A speed-up is the best heuristic's step time over the method's (0 for an invalid decision);
geometric means over graphs are 0 when the method is invalid on some graph.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphopt.baselines.search import random_search, simulated_annealing
from graphopt.baselines.staged import measure_chain
from graphopt.decoders.search import search_placements
from graphopt.eval.budgets import CALLS, MAX_CALLS, SECONDS, parse_budgets  # noqa: F401
from graphopt.eval.compare import MethodResult, estimate_search_row, geomean_speedup
from graphopt.file_set import FileSet, figure_bytes
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import Simulator
from graphopt.typing import Decision

PolicyRunner = Callable[[int, str], tuple[Decision, int]]
"""``(graph index, mode) -> (decision, simulator calls it used)``, for modes of
:func:`policies.rollout.parse_mode`."""


@dataclass(frozen=True)
class CurvePoint:
    """One method on one graph at one budget."""

    graph: str
    method: str
    axis: str  # "calls" or "seconds"
    budget: float
    step_time: float
    valid: bool
    speedup: float
    """Over the graph's best heuristic; 0 for an invalid decision."""
    calls: int
    seconds: float
    decision: Decision | None = field(default=None, compare=False, repr=False)
    """The decision the point measures (not written to curves.csv / curves.json; saved with
    :func:`stage_curve_decisions`). Points of a method that does not depend on the budget (the
    best heuristic, greedy) share one decision object."""


FIXED_METHODS = ("best heuristic", "greedy")
"""Methods whose point is the same at every budget."""

ROW_FIELDS = tuple(f for f in CurvePoint.__dataclass_fields__ if f != "decision")
"""The fields of a point written to curves.csv and curves.json."""


@dataclass(frozen=True)
class _Run:
    step_time: float
    valid: bool
    calls: int
    seconds: float
    decision: Decision | None = None


Measured = tuple[float, bool, int, Decision]
"""``(step time, valid, simulator calls, decision)`` of one budgeted run."""


def _timed(fn: Callable[[], Measured]) -> _Run:
    start = time.perf_counter()
    step, valid, calls, decision = fn()
    return _Run(step, valid, calls, time.perf_counter() - start, decision)


def graph_curves(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    *,
    calls: Sequence[int] = CALLS,
    seconds: Sequence[float] = SECONDS,
    seed: int = 0,
    num_priorities: int = 8,
    policy: PolicyRunner | None = None,
    index: int = 0,
    finetune_max: int = 256,
    policy_kinds: Sequence[str] = ("sample", "finetune"),
    sim: Simulator | None = None,
) -> list[CurvePoint]:
    """Every method's points on ``graph`` for ``task`` (module docstring); ``policy`` is called
    with ``index`` and a mode: ``greedy``, then ``KIND:K`` for each of ``policy_kinds``."""
    sim = sim or Simulator()
    began = time.perf_counter()
    chain, score, best = measure_chain(graph, cluster, task, sim)
    m = score.of(best)
    used = sum(len(stage) for stage in chain.stages)
    start = best.decision
    assert start is not None
    heuristic = _Run(m.step_time, m.valid, used, time.perf_counter() - began, start)
    reference = heuristic.step_time
    at_start = _Run(heuristic.step_time, heuristic.valid, 0, 0.0, start)  # every search at K = 0

    def measured(decision: Decision, used: int) -> Measured:
        m = sim.evaluate(graph, cluster, decision)
        return m.step_time, m.valid, used, decision

    def search(fn: Any) -> Callable[[int], _Run]:
        def run(k: int) -> _Run:
            if k == 0:
                return at_start

            def go() -> Measured:
                res = fn(graph, cluster, task, k, seed, start=start, num_priorities=num_priorities)
                return (
                    res.measurement.step_time,
                    res.measurement.valid,
                    res.evaluations,
                    res.decision,
                )

            return _timed(go)

        return run

    budgeted: dict[str, Callable[[int], _Run | None]] = {
        "random-search": search(random_search),
        "annealing": search(simulated_annealing),
    }
    if task == "placement":
        known = MethodResult(
            best.method, "heuristic", m.step_time, m.valid, m.reason, heuristic.seconds, used
        )

        def estimated(k: int) -> _Run:
            if k == 0:
                return at_start
            row = estimate_search_row(graph, cluster, start, known, k, seed, sim)
            return _Run(row.step_time, row.valid, row.evaluations, row.wall_seconds, row.decision)

        budgeted["estimate-search"] = estimated

        def decoder_searched(k: int) -> _Run:
            if k == 0:
                return at_start

            def go() -> Measured:
                found = search_placements(graph, cluster, start, k, seed=seed, cost_model=sim)
                m = found.measurement
                return m.step_time, m.valid, found.calls, found.decision

            return _timed(go)

        budgeted["decoder-search"] = decoder_searched
    fixed: dict[str, _Run] = {FIXED_METHODS[0]: heuristic}
    if policy is not None:
        fixed[FIXED_METHODS[1]] = _timed(lambda: measured(*policy(index, "greedy")))
        for kind in policy_kinds:
            budgeted[kind] = _policy_budget(policy, index, kind, finetune_max, measured)

    points: list[CurvePoint] = []

    def add(method: str, axis: str, budget: float, run: _Run | None) -> None:
        if run is None:
            return
        ok = run.valid and math.isfinite(run.step_time) and run.step_time > 0
        speedup = reference / run.step_time if ok else 0.0
        points.append(
            CurvePoint(
                graph.name,
                method,
                axis,
                budget,
                run.step_time,
                run.valid,
                speedup,
                run.calls,
                run.seconds,
                run.decision,
            )
        )

    for method, once in fixed.items():
        for k in calls:
            add(method, "calls", k, once)
        for s in seconds:
            add(method, "seconds", s, once)
    for method, fn in budgeted.items():
        runs = {k: fn(int(k)) for k in calls}
        for k, run in runs.items():
            add(method, "calls", k, run)
        timed = [r for k, r in runs.items() if k > 0 and r is not None and r.seconds > 0]
        if not timed:
            continue
        largest = max(timed, key=lambda r: r.calls)
        rate = max(largest.calls, 1) / largest.seconds
        for s in seconds:
            k = int(min(MAX_CALLS, max(1, math.floor(rate * s))))
            add(method, "seconds", s, fn(k))
    return points


def _policy_budget(
    policy: PolicyRunner,
    index: int,
    kind: str,
    finetune_max: int,
    measured: Callable[[Decision, int], Measured],
) -> Callable[[int], _Run | None]:
    def run(k: int) -> _Run | None:
        if k == 0 or (kind == "finetune" and k > finetune_max):
            return None
        return _timed(lambda: measured(*policy(index, f"{kind}:{k}")))

    return run


def geomeans(points: Sequence[CurvePoint]) -> dict[tuple[str, str, float], float]:
    """``(method, axis, budget) -> geometric mean speed-up`` over the graphs that have the point
    (0 when the method is invalid on one of them)."""
    groups: dict[tuple[str, str, float], list[float]] = {}
    for p in points:
        groups.setdefault((p.method, p.axis, p.budget), []).append(p.speedup)
    return {key: geomean_speedup(values) for key, values in groups.items()}


def write_curves(points: Sequence[CurvePoint], out: Path, title: str) -> list[Path]:
    """Write :func:`curve_files` into ``out``: the three appear together or none
    (:class:`graphopt.file_set.FileSet`); returns their paths.

    Raises:
        ValueError: a file cannot be written; nothing is left.
    """
    files = FileSet(out)
    for name, content in curve_files(points, title).items():
        files.write(name, content)
    files.commit()
    return [out / name for name in CURVE_FILES]


CURVE_FILES = ("curves.csv", "curves.json", "curves.png")
"""The files of a set of anytime curves, in the order :func:`curve_files` gives them."""


def curve_files(points: Sequence[CurvePoint], title: str) -> dict[str, str | bytes]:
    """The files of the curves by name: ``curves.csv`` (one row per point), ``curves.json``
    (points and geometric means) and ``curves.png`` (geometric-mean speed-up against calls and
    against seconds)."""
    import csv
    import io

    from graphopt import strict_json

    rows = [{f: getattr(p, f) for f in ROW_FIELDS} for p in points]
    with io.StringIO(newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(ROW_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
        table = f.getvalue()
    means = [
        {"method": m, "axis": a, "budget": b, "geomean_speedup": v}
        for (m, a, b), v in geomeans(points).items()
    ]
    data = {"title": title, "points": rows, "geomeans": means}
    texts = (table, strict_json.dumps(data, indent=1) + "\n", curves_png(points, title))
    return dict(zip(CURVE_FILES, texts, strict=True))


def point_method(point: CurvePoint) -> str:
    """The name a point's saved decision has: ``METHOD@AXIS=BUDGET`` (``annealing@calls=256``,
    ``sample@seconds=1``), or the method alone for one whose decision does not depend on the
    budget (the best heuristic, greedy)."""
    if point.method in FIXED_METHODS:
        return point.method
    return f"{point.method}@{point.axis}={point.budget:g}"


def stage_curve_decisions(
    pairs: Sequence[tuple[CompGraph, Cluster]],
    per_pair: Sequence[Sequence[CurvePoint]],
    saved: Any,
    *,
    task: str,
    seed: int,
) -> None:
    """Save the decision of every point of ``per_pair`` (the points of each ``(graph, cluster)``
    of ``pairs``, in order) into ``saved`` (a :class:`graphopt.decisions.files.DecisionDir`), one
    file per graph, cluster and :func:`point_method`, measured again with the simulator for its
    record. A decision shared by several points is saved once. The files are staged:
    ``saved.write_index`` moves them into place, with the curves' files."""
    sim = Simulator()
    for (graph, cluster), points in zip(pairs, per_pair, strict=True):
        done: set[str] = set()
        for point in points:
            name = point_method(point)
            if point.decision is None or name in done:
                continue
            done.add(name)
            m = sim.evaluate(graph, cluster, point.decision)
            saved.save(graph, cluster, name, point.decision, m, task=task, seed=seed)


def curves_png(points: Sequence[CurvePoint], title: str) -> bytes:
    """Two panels, as PNG bytes: geometric-mean speed-up over the best heuristic against
    simulator calls and against seconds (log x), one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = geomeans(points)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, axis, label in ((axes[0], "calls", "simulator calls"), (axes[1], "seconds", "seconds")):
        methods = list(dict.fromkeys(m for (m, a, _) in means if a == axis))
        for method in methods:
            xs = sorted(b for (m, a, b) in means if m == method and a == axis)
            ys = [means[(method, axis, b)] for b in xs]
            shown = [(max(x, 1) if axis == "calls" else x, y) for x, y in zip(xs, ys, strict=True)]
            ax.plot(*zip(*shown, strict=True), marker="o", label=method)
        ax.set_xscale("log")
        ax.set_xlabel(label + (" (0 drawn at 1)" if axis == "calls" else ""))
        ax.set_ylabel("speed-up over best heuristic (geomean)")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        return figure_bytes(fig, dpi=110)
    finally:
        plt.close(fig)


def print_curves(points: Sequence[CurvePoint], title: str, console: Any = None) -> None:
    """The geometric-mean speed-ups as two tables (calls, seconds): a row per method, a column
    per budget."""
    from rich.table import Table

    from graphopt.eval.console import make_console

    console = console or make_console()
    means = geomeans(points)
    graphs = len({p.graph for p in points})
    for axis, unit in (("calls", "calls"), ("seconds", "s")):
        budgets = sorted({b for (_, a, b) in means if a == axis})
        if not budgets:
            continue
        table = Table(
            title=f"{title}: speed-up over the best heuristic after a budget of {axis} "
            f"(geometric mean over {graphs} graph(s))"
        )
        table.add_column("method")
        for b in budgets:
            shown = f"{int(b):,}" if axis == "calls" else f"{b:g}"
            table.add_column(f"{shown} {unit}", justify="right", no_wrap=True)
        for method in dict.fromkeys(m for (m, a, _) in means if a == axis):
            cells = []
            for b in budgets:
                value = means.get((method, axis, b))
                cells.append("-" if value is None else f"{value:.3f}x" if value > 0 else "invalid")
            table.add_row(method, *cells)
        console.print(table)
