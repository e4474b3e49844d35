"""A first-improvement search over single-op moves, in the order a :class:`~graphopt.nn.
move_gain.MoveGainNet` predicts (or a random order: what the network must beat).

From ``start``, each move ``(op, device)`` is simulated in turn (one simulator call each) and
kept when the step time falls; after each kept move the remaining moves are ranked again from
the new placement (one event-driven decode and one forward pass, no simulator call), moves
already tried skipped; under a deadline a ranking costs seconds (tens of calls' worth on
1,000-op graphs), so the search keeps going down the last ranking until the calls since it have
taken long enough that rankings take at most :data:`RANKING_SHARE` of the time (moves the kept
ones made void skipped). When every move has been tried, a new pass starts from the current
placement with all moves untried if the last pass kept any (moves that failed before may pay
after the kept ones); a pass that keeps none ends the search (every single move tried at that
placement: a local optimum), as do the calls or the deadline. The start's own step time is the
caller's and not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from graphopt.decoders.event_step import event_graph, unsupported
from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.nn.move_gain import MoveGainNet, load_move_net, move_inputs, ranked_moves
from graphopt.optimizer import MovePhase, Report
from graphopt.sim import Simulator
from graphopt.sim.simulator import PreparedGraph
from graphopt.typing import Decision, IntArray

RANKING_SHARE = 0.25
"""Under a deadline, the most share of the search's time that rankings take (module docstring):
on family-test at 1 s (docs/results/moves.md) 0.5, 0.25 and 0.1 gave +1.7, +2.1 and +2.3 points
over ``graphopt optimize`` (two seeds each), within the noise of one another."""


@dataclass(frozen=True)
class MoveSearchResult:
    """The best placement found (``start`` when nothing beat it), its step time, the simulator
    calls spent, the moves kept and ``history`` ``(calls,)``: the best step time after each
    call."""

    placement: IntArray
    step_time: float
    calls: int
    kept: int
    history: np.ndarray


def move_search(
    graph: CompGraph,
    cluster: Cluster,
    net: MoveGainNet | None,
    start: IntArray,
    calls: int,
    *,
    start_time: float | None = None,
    seed: int = 0,
    prepared: PreparedGraph | None = None,
    deadline: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    on_improve: Callable[[IntArray, float, int], None] | None = None,
) -> MoveSearchResult:
    """Search from ``start`` for at most ``calls`` simulator calls (module docstring): moves in
    ``net``'s order, or in a random order seeded by ``seed`` when ``net`` is None.
    ``start_time``: ``start``'s step time when the caller has it (else one uncounted call);
    ``deadline``: a ``clock()`` value to stop at; ``on_improve(placement,
    step_time, calls)`` after each kept move."""
    prepared = prepared or PreparedGraph(graph, cluster)
    placement = np.array(start, dtype=np.int64)
    if start_time is None:
        start_time = float(prepared.evaluate_batch(placement[None]).step_time[0])
    best, kept, used = float(start_time), 0, 0
    rng = np.random.default_rng(seed)
    history: list[float] = []
    tried: set[tuple[int, int]] = set()

    base = event_graph(graph, cluster)

    def order(p: IntArray) -> list[tuple[int, int]]:
        inputs = move_inputs(graph, cluster, p, base=base, prepared=prepared)
        if net is None:
            moves = inputs.moves()
            moves = moves[rng.permutation(len(moves))]
        else:
            moves, _ = ranked_moves(net, inputs)
        return [m for m in map(tuple, moves.tolist()) if m not in tried]

    ranked_at, ranking = 0.0, 0.0  # when the last ranking began, and what it cost (seconds)

    def rank(p: IntArray) -> list[tuple[int, int]]:
        nonlocal ranked_at, ranking
        ranked_at = clock()
        ranked = order(p)
        ranking = clock() - ranked_at
        return ranked

    queue = rank(placement)
    position, kept_in_pass = 0, 0
    while used < calls:
        if deadline is not None and clock() >= deadline:
            break
        if position >= len(queue):  # every move tried (each where it was when tried)
            if not kept_in_pass:
                break  # none kept since the last full pass: a local optimum of single moves
            tried.clear()  # moves that failed before the kept ones may pay now
            queue, position, kept_in_pass = rank(placement), 0, 0
            continue
        v, d = queue[position]  # never tried since the queue was ranked: order() leaves those out
        position += 1
        if placement[v] == d:  # the op went there since the ranking: no move
            continue
        tried.add((v, d))
        trial = placement.copy()
        trial[v] = d
        result = prepared.evaluate_batch(trial[None])
        used += 1
        if result.valid[0] and float(result.step_time[0]) < best:
            best, placement, kept = float(result.step_time[0]), trial, kept + 1
            kept_in_pass += 1
            if on_improve is not None:
                on_improve(placement, best, used)
            # under a deadline, ranking again waits until the calls since the last ranking have
            # taken long enough that rankings take at most RANKING_SHARE of the time
            if deadline is None or clock() - ranked_at >= ranking / RANKING_SHARE:
                queue, position = rank(placement), 0
        history.append(best)
    return MoveSearchResult(placement, best, used, kept, np.asarray(history))


def move_phase(net: MoveGainNet | None, seed: int = 0) -> MovePhase:
    """The search as a phase of :func:`graphopt.optimizer.optimize_graph` (its ``moves``):
    from the decision's placement, for the calls (its start's pricing counted as one) or the
    seconds given, on the search's simulator (its prepared graph, and its full measurement of
    each kept move for the report); ``net`` None: the moves in a random order seeded by
    ``seed``."""

    def phase(
        graph: CompGraph,
        cluster: Cluster,
        start: Decision,
        calls: int | None,
        seconds: float | None,
        report: Report,
        clock: Callable[[], float],
        sim: Simulator,
    ) -> int:
        assert start.placement is not None
        began = clock()
        prepared = sim.prepare(graph, cluster)

        def improved(placement: IntArray, _: float, used: int) -> None:
            decision = Decision(placement=placement)
            report(used + 1, decision, prepared.evaluate(decision))

        result = move_search(
            graph,
            cluster,
            net,
            start.placement,
            (calls - 1) if calls is not None else 2**62,
            seed=seed,
            prepared=prepared,
            deadline=None if seconds is None else began + seconds,
            clock=clock,
            on_improve=improved,
        )
        return result.calls + 1

    return phase


def load_move_phase(model: str, seed: int = 0) -> MovePhase:
    """:func:`move_phase` of the model in ``model`` (``"builtin"`` or a file of ``graphopt moves
    train``): ``graphopt optimize --moves`` and ``graphopt.optimize(moves=...)``.

    Raises:
        graphopt.errors.InvalidArgument: as :func:`graphopt.nn.move_gain.load_move_net` (a missing,
            corrupt or foreign file, in one line).
    """
    net, _ = load_move_net(model)
    return move_phase(net, seed)


def check_moves(graph: CompGraph, cluster: Cluster) -> None:
    """Refuse, before any work, a graph and cluster the move model cannot read: its inputs are the
    event-driven decoder's state, which runs the simulator's default model only
    (:func:`graphopt.decoders.event_step.unsupported`).

    Raises:
        graphopt.errors.InvalidArgument: one line naming what the model cannot run.
    """
    other = unsupported(graph, cluster)
    if other:
        raise InvalidArgument(
            "the learned move model reads the simulator's default model and cannot read "
            "{other}: optimize without {moves}",
            other=other,
        )
