"""Search over a decoder's inputs, seeded by a network (REGAL-style): simulated annealing whose
state is the per-op outputs ``(C, N)`` that steer :func:`graphopt.decoders.decision.decode`, not
the decision itself, so every state decodes to a coherent decision.

The search starts from ``start`` (the network's greedy outputs; zeros: the reference). Moves:

- **window** (probability :data:`P_WINDOW`): a contiguous window of the topological order, of a
  length drawn uniformly from ``1 .. WINDOW * N``, is released from the anchor (``gate = +1``)
  and pulled towards (or pushed from) one random device: its affinity for that device is set to
  ``N(0, 3^2)``, the others to 0. The list scheduler re-places the whole window against the
  schedule of the rest: a large, coherent move that a search over placements cannot make in one
  step. Without a gate channel (scheduling, fusion) the window's other channels get ``N(0,
  sigma^2)`` noise instead.
- **op** (probability ``(1 - P_WINDOW) * 2/3``): one op released towards a random device
  (affinity noise ``N(0, sigma^2)``, +4 for that device), or, without a gate, noise on one op.
- **anchor** (the rest): one released op anchored again (``gate = -1``).

A move is accepted if the decoded decision is faster, or with the Metropolis probability
``exp(-(log t' - log t) / T)`` under a temperature falling geometrically from ``t_start`` to
``t_end`` over the budget; the best decision seen is returned. Each step is one decode and one
cost-model call; the network is not called again.

:func:`search_placements` is the search of placements from zero outputs anchored on a decision
(the best heuristic's): the ``decoder-search@K`` row of ``graphopt baselines`` and the decoder
part of ``graphopt optimize`` (:mod:`graphopt.optimizer`). It needs no network.

**Pre-screening** (:func:`search_placements` with ``prescreen=M > 1``): each step draws ``M``
window moves, decodes each, and prices them with the analytic insertion-schedule estimate
(:class:`graphopt.sim.estimate.PlacementEstimate`, no simulation); only the one it ranks fastest
is priced by the cost model and judged by the Metropolis rule. For when cost-model calls are the
scarce resource (a learned model, measurements on hardware): ``bench/bench_prescreen.py`` (eight
graphs on ``hetero-cpu-2gpu``) takes ``graphopt optimize`` at 256 calls from 1.081x over the best
heuristic to 1.118x (``M = 8``) and 1.140x (``M = 16``; annealing at 4,096 calls: 1.114x), at
about ``M`` times the wall time per call (the decodes): it trades wall time for cost-model calls.

Budgets: ``budget`` cost-model calls, or ``seconds`` of wall time (``graphopt optimize``), or
both (whichever runs out first). Under a time budget the temperature falls with the share of the
seconds spent instead of the calls made, so the schedule ends as the time does; the moves and
their acceptance are the same. With a call budget alone the search is exactly what it was before
time budgets existed (same seed, same calls, same result).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from graphopt.decoders.decision import DecoderSettings, channels, decode
from graphopt.errors import check_integer
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import Simulator
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import CostModel, Decision, FloatArray, Measurement

Move = Callable[[FloatArray, np.random.Generator], FloatArray]
"""``(current outputs, rng) -> candidate outputs``: one move of a search over decoder outputs."""
WINDOW = 0.2
"""Longest window of a window move, as a share of the ops."""
P_WINDOW = 0.7
"""Share of the moves that release a window."""
MAX_PRESCREEN = 64
"""The most candidate moves pre-screened per cost-model call (:func:`search_placements`)."""


@dataclass(frozen=True)
class DecoderSearchResult:
    """The best decision found, its outputs and measurement, and the calls spent."""

    outputs: FloatArray
    decision: Decision
    measurement: Measurement
    calls: int
    trace: list[float]
    """Best step time after each call (``inf`` while nothing valid was found)."""


def _key(m: Measurement) -> float:
    return math.log(m.step_time) if m.valid and m.step_time > 0 else math.inf


def decoder_search(
    evaluate: Callable[[FloatArray], tuple[Decision, Measurement]],
    start: FloatArray,
    budget: int | None = None,
    *,
    seed: int = 0,
    sigma: float = 1.0,
    gate_channel: int | None = 1,
    affinity: Sequence[int] | None = None,
    t_start: float = 0.003,
    t_end: float = 1e-5,
    seconds: float | None = None,
    on_step: Callable[[int, Decision, Measurement], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    move: Move | None = None,
) -> DecoderSearchResult:
    """Anneal the outputs ``start`` ``(C, N)`` for ``budget`` calls of ``evaluate`` or for
    ``seconds`` (module docstring).

    Args:
        evaluate: outputs -> (decoded decision, its measurement); one cost-model call.
        start: the starting outputs (the network's; counted as the first call).
        budget: cost-model calls, the start's included (>= 1); None: no limit on calls.
        seed: seeds the moves.
        sigma: standard deviation of the noise of op moves.
        gate_channel: the channel whose sign releases an op (placement's ``gate``), or None.
        affinity: the device affinity channels (default: every channel after the gate).
        t_start, t_end: temperatures on ``log`` step time.
        seconds: wall time of the search, the start's call included; None: no time limit. The
            start is always evaluated, so a search returns at least it.
        on_step: called after every call with the calls made so far and the best decision and
            measurement (a caller that is interrupted keeps the best found so far).
        clock: the time source of ``seconds`` (tests pass a fake one).
        move: ``(current outputs, rng) -> candidate outputs`` (a new array), replacing the moves
            of the module docstring (the joint search's, :mod:`graphopt.decoders.joint_search`);
            ``sigma``, ``gate_channel`` and ``affinity`` are then unused.

    Raises:
        ValueError: neither budget nor seconds, ``budget < 1``, ``seconds`` not a positive
            finite number, a non-2-D start or bad temperatures.
    """
    if budget is None and seconds is None:
        raise ValueError("give a budget of calls, of seconds, or both")
    if budget is not None and budget < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be a positive finite number, got {seconds}")
    current = np.array(start, dtype=np.float64)
    if current.ndim != 2 or current.shape[1] < 1:
        raise ValueError(f"start must be (channels, ops) with ops >= 1, got {current.shape}")
    if not 0 < t_end <= t_start:
        raise ValueError(f"temperatures must satisfy 0 < t_end <= t_start, got {t_start}, {t_end}")
    began = clock()
    rng = np.random.default_rng(seed)
    channels, n = current.shape
    devices: list[int] = []
    if gate_channel is not None:
        after = range(gate_channel + 1, channels)
        devices = list(affinity) if affinity is not None else list(after)
    others = [c for c in range(channels) if c != gate_channel and c not in devices]
    decision, m = evaluate(current)
    cur_key = _key(m)
    best = (current.copy(), decision, m, cur_key)
    trace = [m.step_time if m.valid else math.inf]
    if on_step is not None:
        on_step(1, decision, m)
    longest = max(1, int(WINDOW * n))
    step = 1
    while budget is None or step < budget:
        share = 0.0 if budget is None else step / max(1, budget - 1)
        if seconds is not None:
            spent = (clock() - began) / seconds
            if spent >= 1.0:
                break
            share = max(share, spent)
        temp = t_start * (t_end / t_start) ** share
        if move is None:
            cand = window_move(current, rng, gate_channel, devices, others, longest, sigma)
        else:
            cand = move(current, rng)
        decision, m = evaluate(cand)
        key = _key(m)
        if key <= cur_key or (
            math.isfinite(key) and rng.random() < math.exp(-(key - cur_key) / temp)
        ):
            current, cur_key = cand, key
            if key < best[3]:
                best = (cand.copy(), decision, m, key)
        trace.append(best[2].step_time if math.isfinite(best[3]) else math.inf)
        step += 1
        if on_step is not None:
            on_step(step, best[1], best[2])
    return DecoderSearchResult(best[0], best[1], best[2], step, trace)


def window_move(
    current: FloatArray,
    rng: np.random.Generator,
    gate: int | None,
    devices: list[int],
    others: list[int],
    longest: int,
    sigma: float,
) -> FloatArray:
    """One move of the module docstring from ``current`` (a new array)."""
    cand = current.copy()
    n = cand.shape[1]
    r = rng.random()
    if r < P_WINDOW:
        first = int(rng.integers(0, n))
        ops = np.arange(first, min(n, first + int(rng.integers(1, longest + 1))))
        if gate is not None:
            cand[gate, ops] = 1.0
            if devices:
                cand[np.ix_(np.asarray(devices), ops)] = 0.0
                cand[devices[int(rng.integers(0, len(devices)))], ops] = rng.normal(0.0, 3.0)
        elif others:
            cand[np.ix_(np.asarray(others), ops)] += rng.normal(0.0, sigma, (len(others), len(ops)))
        return cand
    if gate is None or r < P_WINDOW + (1.0 - P_WINDOW) * 2.0 / 3.0:
        op = int(rng.integers(0, n))
        if gate is not None:
            cand[gate, op] = 1.0
            if devices:
                cand[devices, op] = rng.normal(0.0, sigma, len(devices))
                cand[devices[int(rng.integers(0, len(devices)))], op] += 4.0
        elif others:
            cand[others, op] += rng.normal(0.0, sigma, len(others))
        return cand
    released = np.flatnonzero(cand[gate] > 0)
    if len(released):
        cand[gate, released[int(rng.integers(0, len(released)))]] = -1.0
    return cand


PLACEMENT_DECODER = DecoderSettings(model="heft-lc", anchor=True, memory=True)
"""How :func:`search_placements` decodes: ``heft-lc`` timing, anchored, memory-aware (the
decoder runs' settings)."""


def search_placements(
    graph: CompGraph,
    cluster: Cluster,
    anchor: Decision,
    budget: int | None = None,
    *,
    seed: int = 0,
    seconds: float | None = None,
    t_start: float = 0.003,
    t_end: float = 1e-5,
    on_step: Callable[[int, Decision, Measurement], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    cost_model: CostModel | None = None,
    prescreen: int = 1,
) -> DecoderSearchResult:
    """:func:`decoder_search` of the placement decoder from zero outputs: every op stays on
    ``anchor``'s device until a move releases it; ``anchor``'s priorities and fusion are kept in
    every decision (defaults where it has none). The first call measures ``anchor``'s placement
    as the decoder rebuilds it (the anchor itself, projected onto placement constraints). With
    ``prescreen=M > 1`` each step's move is the one the analytic estimate ranks fastest of ``M``
    window moves (module docstring); ``prescreen=1`` is the plain search, call for call.

    Args:
        graph, cluster: what is placed.
        anchor: the decision to start from (the best heuristic's, for the baselines).
        budget, seed, seconds, t_start, t_end, on_step, clock: as :func:`decoder_search`.
        cost_model: prices each decision (default: a new :class:`~graphopt.sim.Simulator`).
        prescreen: candidate moves ranked by the estimate per cost-model call, in
            ``1..MAX_PRESCREEN``.

    Raises:
        ValueError: as :func:`decoder_search`; an anchor that does not fit the graph or cluster;
            ``prescreen`` out of range.
    """
    check_integer(prescreen, "prescreen", 1, MAX_PRESCREEN)
    model: CostModel = cost_model if cost_model is not None else Simulator()
    full = anchor.filled(graph.num_ops)
    names = channels("placement", cluster.num_devices)
    screened: list[tuple[FloatArray, np.ndarray]] = []  # the last move chosen and its placement

    def place(outputs: FloatArray) -> np.ndarray:
        placement = decode(
            "placement", graph, cluster, outputs, full, "", PLACEMENT_DECODER
        ).placement
        assert placement is not None  # the placement decoder always places
        return placement

    def evaluate(outputs: FloatArray) -> tuple[Decision, Measurement]:
        known = screened and screened[-1][0] is outputs
        placement = screened.pop()[1] if known else place(outputs)
        decision = Decision(placement, full.priority, full.fusion)
        return decision, model.evaluate(graph, cluster, decision)

    gate = names.index("gate")
    affinity = [c for c, name in enumerate(names) if name.startswith("affinity:")]
    move: Move | None = None
    if prescreen > 1:
        estimate = PlacementEstimate(graph, cluster)
        longest = max(1, int(WINDOW * graph.num_ops))

        def move(current: FloatArray, rng: np.random.Generator) -> FloatArray:
            moves = [
                window_move(current, rng, gate, affinity, [], longest, 1.0)
                for _ in range(prescreen)
            ]
            placements = np.stack([place(m) for m in moves])
            best = int(np.argmin(estimate(placements)))
            screened[:] = [(moves[best], placements[best])]
            return moves[best]

    return decoder_search(
        evaluate,
        np.zeros((len(names), graph.num_ops)),
        budget,
        seed=seed,
        gate_channel=gate,
        affinity=affinity,
        t_start=t_start,
        t_end=t_end,
        seconds=seconds,
        on_step=on_step,
        clock=clock,
        move=move,
    )
