"""The best decision for one graph within a budget the user gives: ``graphopt optimize`` and
``graphopt.optimize``.

1. **Start.** Every heuristic of the task's chain is run and measured
   (:func:`graphopt.baselines.staged.measure_chain`); the best is the start. A given start
   decision (a trained run's, ``graphopt optimize --run``) replaces it when it is faster.
2. **Search**, anytime, from the start, the strongest the task has:

   - placement: :data:`ROUNDS` rounds, each of the search through the placement decoder
     (:func:`graphopt.decoders.search.decoder_search`, from zero outputs) for
     :data:`DECODER_SHARE` of the round's budget, then simulated annealing of the placement for
     the rest. The decoder search releases windows of the topological order from its anchor and
     lets the list scheduler re-place them against the rest (:mod:`graphopt.decoders.placement`,
     ``heft-lc`` timing, memory-aware): large coherent moves (on six held-out graphs 1.098x over
     the best heuristic at 4,096 calls, annealing 1.050x: docs/results/decoder.md). Annealing
     then makes the small moves the windows miss, and the next round anchors its windows on the
     best decision so far. (Measured on the eight graphs of ``bench/bench_optimize.py`` at 1 s:
     two such rounds won on 7 of 8 graphs against annealing on both clusters, the decoder
     search alone on 6 of 8; four rounds did worse than two.)
   - placement with a learned move model (``graphopt optimize --moves MODEL.pt``,
     :class:`graphopt.nn.move_gain.MoveGainNet`): those rounds on the first half of the budget
     (:data:`MOVES_SHARE`), then a first-improvement search over single-op moves from the best
     so far, in the order the model predicts they pay (:mod:`graphopt.nn.move_search`), and
     annealing for any budget it leaves (it stops at a local optimum of single moves).
   - joint: the same rounds with the joint decoder search
     (:func:`graphopt.decoders.joint_search.search_joint`) in place of the placement's: the
     placement windows (a released op of a fused kernel follows the kernel, so kernels move
     whole), the scheduler of the best heuristic rerun on each new placement with priority
     shifts, and fusion vetoes and additions, every decoded decision legal; then annealing of
     all three arrays.
   - scheduling, fusion (no decoder search for them yet): simulated annealing of the task's
     array (:func:`graphopt.baselines.search.simulated_annealing`).

   Annealing runs in rounds of :data:`ROUND_CALLS` calls, each from the best decision so far.
   Every part of the search runs its stretch of one geometric temperature schedule, from
   :data:`T_START` at the start of the budget to :data:`T_END` at its end.

3. **Result**: the best decision seen (never worse than the start), its measurement, every
   heuristic's measurement (for the speed-ups), the calls and seconds spent.

Budgets: ``calls`` counts the search's simulator calls, each part's start included (the chain's
heuristics come on top, about a dozen); ``seconds`` is the wall time of the whole call, the
heuristics included; the search stops once it is spent (a call already running finishes).
Under ``seconds`` each part of the search has the share of the time left after the heuristics,
and its temperature follows the share of that time spent. ``on_progress`` is called after every
decoder step and every round of annealing with the best so far, so a caller that is interrupted
(Ctrl-C) still holds the best decision found.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphopt.baselines.search import simulated_annealing
from graphopt.baselines.staged import measure_chain
from graphopt.decoders.joint_search import search_joint
from graphopt.decoders.search import MAX_PRESCREEN, search_placements
from graphopt.errors import InvalidArgument, check_integer
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster, get_cluster
from graphopt.sim import Simulator
from graphopt.tasks import ARRAYS, ONE_SHOT_TASKS, get_task
from graphopt.typing import Decision, Measurement

MAX_CALLS = 2**22
"""The largest call budget (about an hour of search on small graphs)."""
MAX_SECONDS = 7 * 24 * 3600.0
"""The largest time budget: a week."""
ROUND_CALLS = 64
"""Simulator calls per round of the annealing fallback (between two progress reports)."""
PROBE_CALLS = 8
"""Calls of the first annealing round under a time budget when the calls per second are not
known yet (a round of :data:`ROUND_CALLS` on a large graph can take seconds)."""
NUM_PRIORITIES = 8
"""Priority levels the annealing fallback searches (``graphopt baselines``' default)."""


DECODER_TASKS = ("placement", "joint")
"""The tasks with a decoder search (the others anneal)."""


def method_of(task: str) -> str:
    """The search :func:`optimize_graph` runs for ``task``: ``decoder-search+annealing``
    (placement, joint) or ``annealing``."""
    decoded = get_task(task, ONE_SHOT_TASKS).name in DECODER_TASKS
    return "decoder-search+annealing" if decoded else "annealing"


@dataclass(frozen=True)
class HeuristicResult:
    """One heuristic of the chain: its name and measurement (``None`` with ``error`` when it gave
    no decision)."""

    method: str
    measurement: Measurement | None
    error: str = ""


@dataclass(frozen=True)
class Progress:
    """The search so far, as :func:`optimize_graph` reports it after each step."""

    calls: int
    """Simulator calls of the search so far."""
    seconds: float
    """Wall time since the call began (heuristics included)."""
    share: float
    """Share of the budget spent, in ``[0, 1]``."""
    decision: Decision
    measurement: Measurement
    """The best decision so far and its measurement."""
    start_time: float
    """The start's step time, seconds (what the search improves on)."""
    start: str
    """What the search started from (the best heuristic's chain name, or a given start's)."""
    method: str
    """The search running: ``decoder-search+annealing`` or ``annealing``."""

    @property
    def speedup(self) -> float:
        """The start's step time over the best's (0 while the best is invalid)."""
        m = self.measurement
        return self.start_time / m.step_time if m.valid and m.step_time > 0 else 0.0


@dataclass(frozen=True)
class Optimized:
    """What :func:`optimize_graph` found."""

    graph: str
    cluster: str
    task: str
    method: str
    """The search that ran: ``decoder-search+annealing`` or ``annealing``."""
    decision: Decision
    """The best decision (every array filled)."""
    measurement: Measurement
    start: str
    """What the search started from: the best heuristic's chain name (``heft``,
    ``heft+critical-path+xla``) or the name of a given start."""
    best_heuristic: str
    """The best heuristic, by its chain's name (``heft``, ``heft+critical-path+xla``)."""
    heuristic_decision: Decision
    """Its decision (filled), what :attr:`decision` is compared with (ops moved)."""
    heuristic_measurement: Measurement
    heuristics: tuple[HeuristicResult, ...]
    """Every heuristic of the task's chain, in order."""
    calls: int
    """Simulator calls of the search (the heuristics' not included)."""
    seconds: float
    """Wall time of the whole call."""
    trace: tuple[float, ...] = field(default=(), repr=False)
    """Best valid step time after each progress report (``inf`` before a valid one)."""
    given: tuple[str, Measurement] | None = None
    """A given start's name and measurement (whether or not the search started from it)."""

    def speedup_over(self, step_time: float) -> float:
        """``step_time`` over the best decision's (0 when it is invalid)."""
        m = self.measurement
        return step_time / m.step_time if m.valid and m.step_time > 0 else 0.0


def check_budget(seconds: float | None, calls: int | None) -> None:
    """Refuse a budget that is not exactly one of a positive finite number of ``seconds`` (at
    most :data:`MAX_SECONDS`) and an integer of ``calls`` in ``1..MAX_CALLS``.

    Raises:
        InvalidArgument: naming the argument, what it got and what is allowed.
    """
    if (seconds is None) == (calls is None):
        raise InvalidArgument(
            "give exactly one budget: {seconds} (wall time) or {calls} (simulator calls)"
        )
    if seconds is not None:
        ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
        if not (ok and math.isfinite(seconds) and 0 < seconds <= MAX_SECONDS):
            raise InvalidArgument(
                "{seconds} must be a number of seconds in (0, {most:g}], got {got!r}",
                most=MAX_SECONDS,
                got=seconds,
            )
    if calls is not None:
        if isinstance(calls, bool) or not isinstance(calls, (int, np.integer)):
            raise InvalidArgument("{calls} must be an integer, got {got!r}", got=calls)
        if not 1 <= calls <= MAX_CALLS:
            raise InvalidArgument(
                "{calls} must be in 1..{most}, got {got}", most=MAX_CALLS, got=int(calls)
            )


def check_prescreen(prescreen: int, task: str) -> None:
    """Refuse a ``prescreen`` that is not an integer in ``1..MAX_PRESCREEN``, or above 1 for a
    task other than placement (only the placement decoder search pre-screens its moves).

    Raises:
        InvalidArgument: naming the argument, what it got and what is allowed.
    """
    check_integer(prescreen, "prescreen", 1, MAX_PRESCREEN)
    if prescreen > 1 and task != "placement":
        raise InvalidArgument(
            "{prescreen} applies to the placement task's decoder search, not to {task}; "
            "leave it at 1",
            task=task,
        )


def resolve(graph: CompGraph | str, cluster: Cluster | str) -> tuple[CompGraph, Cluster]:
    """``graph`` (a :class:`CompGraph`, or anything :func:`graphopt.workloads.resolve_graphs`
    reads that names one graph) and ``cluster`` (a :class:`Cluster`, a preset or a cluster file).

    Raises:
        ValueError: an unknown graph or cluster, or a spec that names several graphs or none.
    """
    if not isinstance(graph, CompGraph):
        from graphopt.workloads import resolve_graphs

        found = resolve_graphs(graph)
        if len(found) != 1:
            raise InvalidArgument(
                "{graph} must name one graph, got {got!r} ({count} graphs)",
                got=graph,
                count=len(found),
            )
        graph = found[0]
    if graph.num_ops == 0:
        raise InvalidArgument(
            "{graph} {got!r} has no ops: there is nothing to decide", got=graph.name
        )
    return graph, get_cluster(cluster)


def optimize_graph(
    graph: CompGraph | str,
    cluster: Cluster | str,
    *,
    task: str = "placement",
    seconds: float | None = None,
    calls: int | None = None,
    seed: int = 0,
    start: Decision | None = None,
    start_name: str = "start",
    on_progress: Callable[[Progress], None] | None = None,
    sim: Simulator | None = None,
    clock: Callable[[], float] = time.perf_counter,
    prescreen: int = 1,
    moves: MovePhase | None = None,
) -> Optimized:
    """The best decision for ``task`` on ``graph`` and ``cluster`` within the budget (module
    docstring).

    Args:
        graph: a :class:`CompGraph` or a name / file / source naming one graph.
        cluster: a :class:`Cluster`, a preset name or a cluster file.
        task: placement or joint (the decoder search of the task, then annealing), scheduling
            or fusion (annealing).
        seconds: wall time of the whole call, heuristics included; or
        calls: simulator calls of the search, its start's included (exactly one of the two).
        seed: seeds the search.
        start: a decision to start from instead of the best heuristic when it is faster (by
            validity, then step time); its arrays the task does not decide are replaced by the
            best heuristic's, and so are its placement's ``-1`` entries (ops it does not place:
            :func:`graphopt.decisions.format.placement_by_names`), as they are or renumbered to
            agree with the start, whichever simulates faster (:func:`filled_placements`).
        start_name: how the result names ``start`` when it is used.
        on_progress: called after every step of the search with the best so far.
        sim: the simulator (a new one by default).
        clock: the time source (tests pass a fake one).
        prescreen: placement only: window moves of the decoder search ranked by the analytic
            estimate per simulator call (:func:`graphopt.decoders.search.search_placements`;
            1: none). For budgets of calls, when calls are the scarce resource.
        moves: placement only: a search over single-op moves ranked by a learned model
            (:func:`graphopt.nn.move_search.move_phase`) that takes the last
            :data:`MOVES_SHARE` of the budget, from the best so far, the other phases
            compressed into the rest (module docstring).

    Raises:
        InvalidArgument: a bad budget, task, graph, cluster or prescreen (naming the argument);
            ``moves`` for a task other than placement.
        ValueError: no heuristic gave a decision; a start that does not fit the graph.
    """
    began = clock()
    get_task(task, ONE_SHOT_TASKS)
    check_budget(seconds, calls)
    check_prescreen(prescreen, task)
    if moves is not None and get_task(task, ONE_SHOT_TASKS).name != "placement":
        raise InvalidArgument(
            f"a learned move model ranks placement moves; task {task} has none (use placement)"
        )
    graph, cluster = resolve(graph, cluster)
    sim = sim or Simulator()
    n = graph.num_ops
    method = method_of(task) + ("+learned-moves" if moves is not None else "")

    # --- start: every heuristic of the chain, measured; the best (or a faster given start)
    chain, score, best = measure_chain(graph, cluster, task, sim)
    shown = chain.stages if task in ("placement", "joint") else chain.stages[1:]
    heuristics = tuple(
        HeuristicResult(c.method, score.of(c) if c.decision is not None else None, c.error)
        for stage in shown
        for c in stage
    )
    assert best.decision is not None
    heuristic_decision = best.decision.filled(n)
    heuristic_m = score.of(best)
    anchor, anchor_m, anchor_name = heuristic_decision, heuristic_m, chain.name
    given_m = None
    if start is not None:
        for option in _merged(start, heuristic_decision, task, n, cluster):
            option_m = sim.evaluate(graph, cluster, option)
            if given_m is None or _key(option_m) < _key(given_m):
                given, given_m = option, option_m
        assert given_m is not None
        if _key(given_m) < _key(anchor_m):
            anchor, anchor_m, anchor_name = given, given_m, start_name

    # --- search: the task's phases, each a share of the budget, from the best so far
    search_began = clock()
    left = None if seconds is None else max(seconds - (search_began - began), 0.0)
    trace: list[float] = []
    incumbent = _Incumbent(anchor, anchor_m)  # the best so far
    used = 0

    def report(calls_done: int, decision: Decision, m: Measurement) -> None:
        if _key(m) < _key(incumbent.measurement):
            incumbent.decision, incumbent.measurement = decision, m
        trace.append(incumbent.measurement.step_time if incumbent.measurement.valid else math.inf)
        if on_progress is None:
            return
        spent = clock() - began
        share = spent / seconds if seconds is not None else calls_done / (calls or 1)
        on_progress(
            Progress(
                calls_done,
                spent,
                min(share, 1.0),
                incumbent.decision,
                incumbent.measurement,
                anchor_m.step_time,
                anchor_name,
                method,
            )
        )

    annealing_rate = 0.0
    for kind, lo, hi in phases(task, moves is not None):
        part_calls, part_seconds = None, None
        if calls is not None:
            part_calls = round(calls * hi) - used
            if part_calls < 1:
                continue
        else:
            assert left is not None
            part_seconds = search_began + left * hi - clock()
            if part_seconds <= 0 and used > 0:
                continue
            part_seconds = max(part_seconds, 1e-9)  # with no time left, one call: the start

        def part_report(k: int, d: Decision, m: Measurement, base: int = used) -> None:
            report(base + k, d, m)

        if kind == "moves":
            assert moves is not None
            used += moves(
                graph,
                cluster,
                incumbent.decision,
                part_calls,
                part_seconds,
                part_report,
                clock,
                sim,
            )
        elif kind == "decoder":
            used += _decoder_search(
                graph,
                cluster,
                task,
                chain.name,
                incumbent.decision,
                part_calls,
                part_seconds,
                (lo, hi),
                seed + used,
                sim,
                part_report,
                clock,
                prescreen,
            )
        else:
            done, annealing_rate = _annealing(
                graph,
                cluster,
                task,
                incumbent.decision,
                part_calls,
                part_seconds,
                (lo, hi),
                seed + used,
                part_report,
                clock,
                annealing_rate,  # the last annealing phase's calls per second (0: none yet)
            )
            used += done
    decision, m = incumbent.decision, incumbent.measurement
    return Optimized(
        graph=graph.name,
        cluster=cluster.name,
        task=task,
        method=method,
        decision=decision.filled(n),
        measurement=m,
        start=anchor_name,
        best_heuristic=chain.name,
        heuristic_decision=heuristic_decision,
        heuristic_measurement=heuristic_m,
        heuristics=heuristics,
        calls=used,
        seconds=clock() - began,
        trace=tuple(trace),
        given=None if given_m is None else (start_name, given_m),
    )


def _merged(
    start: Decision, heuristic: Decision, task: str, n: int, cluster: Cluster
) -> list[Decision]:
    """``start``'s arrays that ``task`` decides, the heuristic's for the rest: one decision, or
    two when ``start``'s placement leaves ops at ``-1`` (:func:`filled_placements`).

    Raises:
        ValueError: an array of ``start`` without one entry per op.
    """
    decides = get_task(task, ONE_SHOT_TASKS).blocks
    arrays = {}
    placements: list[np.ndarray] = []
    for block, key in ARRAYS.items():
        mine = getattr(start, key)
        if block in decides and mine is not None:
            mine = np.asarray(mine, dtype=np.int64)
            if mine.shape != (n,):
                raise InvalidArgument(
                    "{start} has a {key} of shape {shape}; the graph has {n} ops",
                    key=key,
                    shape=mine.shape,
                    n=n,
                )
            if key == "placement" and (mine < 0).any():
                assert heuristic.placement is not None  # the heuristic's decision is filled
                placements = filled_placements(mine, heuristic.placement, cluster)
            arrays[key] = mine
        else:
            arrays[key] = getattr(heuristic, key)
    if not placements:
        return [Decision(**arrays).filled(n)]
    return [Decision(**{**arrays, "placement": p}).filled(n) for p in placements]


def filled_placements(
    partial: np.ndarray, heuristic: np.ndarray, cluster: Cluster
) -> list[np.ndarray]:
    """Two ways to place the ops ``partial`` leaves at ``-1`` (a decision of another version of
    the model: :func:`graphopt.decisions.format.placement_by_names`): on the best heuristic's
    devices as they are, and on its devices renumbered to agree most with ``partial`` on the ops
    both place (an assignment between devices of one kind: a heuristic such as METIS numbers its
    parts its own way)."""
    from scipy.optimize import linear_sum_assignment

    d = cluster.num_devices
    named = partial >= 0
    agree = np.zeros((d, d))
    np.add.at(agree, (heuristic[named], partial[named]), 1.0)
    kinds = np.array([device.kind for device in cluster.devices], dtype=object)
    agree[kinds[:, None] != kinds[None, :]] = -float(len(partial) + 1)
    rows, cols = linear_sum_assignment(agree, maximize=True)
    renumber = np.arange(d)
    renumber[rows] = cols
    return [np.where(named, partial, heuristic), np.where(named, partial, renumber[heuristic])]


Report = Callable[[int, Decision, Measurement], None]
"""``(calls of the part so far, a decision, its measurement)``: after every call (or round)."""
MovePhase = Callable[
    [
        CompGraph,
        Cluster,
        Decision,
        "int | None",
        "float | None",
        Report,
        Callable[[], float],
        Simulator,
    ],
    int,
]
"""A search phase over single-op moves (:func:`graphopt.nn.move_search.move_phase`): from the
decision given, for the calls or seconds given, reporting each improvement, pricing with the
search's simulator; returns its calls."""
MOVES_SHARE = 0.5
"""The share of the budget a learned move model's phase takes, last (measured on the 28
family-test graphs of at most 1,400 ops at 256 calls: the decoder search and annealing on half,
then the moves on the other half, 1.104x over the best heuristic against 1.076x for the search
alone and 1.073x with the moves in a random order; ``bench/bench_move_gain.py --load
builtin``)."""

ROUNDS = 2
"""Rounds of decoder search then annealing, for placement and joint."""
DECODER_SHARE = 0.7
"""The decoder search's share of each round's budget (annealing has the rest)."""
T_START, T_END = 3e-3, 1e-5
"""Temperatures on log step time at the start and the end of the budget
(:func:`graphopt.baselines.search.simulated_annealing`'s defaults)."""


def phases(task: str, moves: bool = False) -> list[tuple[str, float, float]]:
    """``(kind, from, to)``: the parts of the search of ``task`` and the shares of the budget
    they end at (module docstring); kind ``decoder``, ``annealing`` or (``moves``: a learned
    move model is given) ``moves``, the last :data:`MOVES_SHARE`, then annealing for whatever
    budget the moves leave when they stop at a local optimum."""
    if method_of(task) != "decoder-search+annealing":
        return [("annealing", 0.0, 1.0)]
    out = []
    for r in range(ROUNDS):
        lo, hi = r / ROUNDS, (r + 1) / ROUNDS
        middle = lo + DECODER_SHARE * (hi - lo)
        out += [("decoder", lo, middle), ("annealing", middle, hi)]
    if moves:  # annealing takes what the moves leave (a local optimum of single moves ends them)
        rest = 1.0 - MOVES_SHARE
        out = [(kind, lo * rest, hi * rest) for kind, lo, hi in out]
        out += [("moves", rest, 1.0), ("annealing", 1.0, 1.0)]
    return out


def _temperature(share: float) -> float:
    return T_START * (T_END / T_START) ** min(max(share, 0.0), 1.0)


def _key(m: Measurement) -> tuple[bool, float]:
    return (not m.valid, m.step_time)


@dataclass
class _Incumbent:
    """The best decision so far and its measurement."""

    decision: Decision
    measurement: Measurement


def _decoder_search(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    chain_name: str,
    anchor: Decision,
    calls: int | None,
    seconds: float | None,
    shares: tuple[float, float],
    seed: int,
    sim: Simulator,
    report: Report,
    clock: Callable[[], float],
    prescreen: int = 1,
) -> int:
    """The decoder search of ``task`` from zero outputs anchored on ``anchor``
    (:func:`graphopt.decoders.search.search_placements`, or for joint
    :func:`graphopt.decoders.joint_search.search_joint`, which reruns the scheduler of
    ``chain_name`` on new placements), over the temperatures of ``shares``; returns its calls."""
    options: dict[str, Any] = dict(
        seed=seed,
        seconds=seconds,
        t_start=_temperature(shares[0]),
        t_end=_temperature(shares[1]),
        on_step=report,
        clock=clock,
        cost_model=sim,
    )
    if task == "joint":
        return search_joint(graph, cluster, anchor, chain_name, calls, **options).calls
    return search_placements(graph, cluster, anchor, calls, prescreen=prescreen, **options).calls


def _annealing(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    start: Decision,
    calls: int | None,
    seconds: float | None,
    shares: tuple[float, float],
    seed: int,
    report: Report,
    clock: Callable[[], float],
    rate_hint: float = 0.0,
) -> tuple[int, float]:
    """Annealing of ``task``'s arrays from ``start`` in rounds of :data:`ROUND_CALLS` calls, each
    from the best so far, over the temperatures of ``shares``; returns its calls and its calls
    per second (0 when not measured).

    Under ``seconds``, a round's share of the temperatures and its size come from the calls per
    second so far (before the first round: ``rate_hint``, an earlier phase's; 0, unknown: a
    first round of :data:`PROBE_CALLS`): a round is cut to the calls the time left allows (at
    least one), so that on a large graph, where a call takes a tenth of a second, the budget is
    not overrun by a whole round."""
    began = clock()
    best: tuple[Decision, Measurement] | None = None
    used, k = 0, 0
    lo, hi = shares
    rate = 0.0
    while True:
        spent = clock() - began
        if calls is not None:
            size = min(ROUND_CALLS, calls - used)
            if size < 1:
                break
            share, end = used / calls, (used + size) / calls
        else:
            assert seconds is not None
            rate = used / spent if used and spent > 0 else rate_hint
            if spent >= seconds and used > 0:
                break
            size = PROBE_CALLS
            if rate > 0:
                size = int(min(ROUND_CALLS, max(1.0, rate * (seconds - spent))))
            share = min(spent / seconds, 1.0)
            end = min(1.0, share + size / (rate * seconds)) if rate > 0 else share
        found = simulated_annealing(
            graph,
            cluster,
            task,
            size,
            seed + k,
            start=start if best is None else best[0],
            num_priorities=NUM_PRIORITIES,
            t_start=_temperature(lo + (hi - lo) * share),
            t_end=_temperature(lo + (hi - lo) * end),
        )
        used, k = used + size, k + 1
        if best is None or _key(found.measurement) < _key(best[1]):
            best = (found.decision, found.measurement)
        report(used, best[0], best[1])
    return used, rate
