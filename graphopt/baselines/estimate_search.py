"""Placement search on the analytic step-time estimate: no simulator evaluation at all.

:func:`estimate_search` hill-climbs from a start placement by single-op moves (one op to another
device), judging each candidate by the contention-aware insertion schedule of
:meth:`graphopt.costmodel.features.DecisionFeaturizer.insertion_schedule` -- the learned cost
model's prior, a Kendall tau of about 0.91 against the simulator on held-out graphs (README,
"Learned cost model") -- instead of by the simulator. Each round draws ``batch`` candidate moves
from the current placement with a *proposer*, estimates all of them at once, and moves to the
best if its estimate is strictly lower; ``budget`` estimates in all. A placement whose parameter
bytes exceed a device's memory is estimated at ``inf`` (never accepted).

What the estimate ignores (memory beyond parameters, priorities, fusion, the simulator's
event-driven dispatch) is where it can be fooled: the more moves it accepts, the further its
gains can drift from the simulator's. Callers that can afford one simulation compare the result
with the start (``graphopt eval --mode plan:K`` does).

Proposers are ``(rng, current (N,), k) -> (ops (k,), devices (k,))`` with every device different
from the op's current one: :func:`uniform_moves` (the baseline) and :func:`weighted_moves` (drawn
from a policy's per-op device probabilities, mixed with uniform moves).

Placement constraints (:mod:`graphopt.constraints`): the start is projected onto the allowed
devices, and a proposed move takes the rest of the op's enforced colocation group (its block,
under ``contiguous: true``) along; a move to a device that some moved op may not use, or one
that puts the stages on a cycle, leaves the placement as it is (that candidate is still
estimated and counted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from graphopt.constraints import constraints
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim.estimate import PlacementEstimate
from graphopt.typing import FloatArray, IntArray

Proposer = Callable[[np.random.Generator, IntArray, int], tuple[IntArray, IntArray]]


@dataclass(frozen=True)
class EstimateSearchResult:
    """What :func:`estimate_search` found.

    Attributes:
        placement: ``(N,)`` the best placement by the estimate (the start when no move helped).
        estimate: its estimated step time (s).
        start_estimate: the start's estimated step time (s).
        estimates: estimates spent: ``budget``, or 0 where no move exists (no ops, or a single
            device); the start's own is not counted.
        moves: moves accepted.
    """

    placement: IntArray
    estimate: float
    start_estimate: float
    estimates: int
    moves: int

    @property
    def estimated_speedup(self) -> float:
        """Start estimate over final estimate (what the search believes it gained; 1 for an
        empty graph)."""
        return self.start_estimate / self.estimate if self.estimate > 0 else 1.0


def uniform_moves(num_ops: int, num_devices: int) -> Proposer:
    """Moves of a uniformly drawn op to a uniformly drawn other device."""
    if num_devices < 2:
        raise ValueError("a placement search needs a cluster of at least 2 devices")

    def propose(rng: np.random.Generator, current: IntArray, k: int) -> tuple[IntArray, IntArray]:
        ops = rng.integers(0, num_ops, k)
        return ops, (current[ops] + rng.integers(1, num_devices, k)) % num_devices

    return propose


def weighted_moves(probs: FloatArray, uniform_share: float = 0.5) -> Proposer:
    """Moves drawn from per-op device probabilities ``probs`` ``(N, D)`` (a policy's).

    An op is drawn with probability proportional to the probability mass *off* its current device
    (how much the policy wants it elsewhere), its new device in proportion to ``probs`` over the
    other devices. A ``uniform_share`` of the moves comes from :func:`uniform_moves` instead, so
    every move stays possible however confident the policy is.
    """
    probs = np.asarray(probs, dtype=np.float64)
    n, d = probs.shape
    if not 0.0 <= uniform_share <= 1.0:
        raise ValueError(f"uniform_share must be in [0, 1], got {uniform_share}")
    uniform = uniform_moves(n, d)

    def propose(rng: np.random.Generator, current: IntArray, k: int) -> tuple[IntArray, IntArray]:
        ops, devices = uniform(rng, current, k)
        guided = np.flatnonzero(rng.random(k) >= uniform_share)
        if guided.size:
            away = probs.copy()
            away[np.arange(n), current] = 0.0
            mass = away.sum(axis=1)
            if mass.sum() > 0:
                chosen = rng.choice(n, guided.size, p=mass / mass.sum())
                rows = away[chosen] / mass[chosen, None]
                u = rng.random(guided.size)[:, None]
                ops[guided] = chosen
                devices[guided] = np.minimum((rows.cumsum(axis=1) < u).sum(axis=1), d - 1)
                stuck = devices[guided] == current[chosen]  # rounding at the top of the cumsum
                devices[guided[stuck]] = (current[chosen[stuck]] + 1) % d
        return ops, devices

    return propose


def estimate_search(
    graph: CompGraph,
    cluster: Cluster,
    start: IntArray,
    budget: int,
    *,
    seed: int = 0,
    propose: Proposer | None = None,
    batch: int = 4,
    estimate: PlacementEstimate | None = None,
) -> EstimateSearchResult:
    """Hill-climb from placement ``start`` on the analytic estimate (module docstring).

    Args:
        start: ``(N,)`` device of every op.
        budget: candidate placements to estimate (>= 0).
        seed: seeds the proposals (``numpy.random.default_rng(seed)``).
        propose: the move proposer; :func:`uniform_moves` by default.
        batch: candidates estimated per round (the last round may be smaller).
        estimate: a prepared :class:`PlacementEstimate` of this graph and cluster (built if None).

    Deterministic for a given ``seed``.
    """
    if budget < 0 or batch < 1:
        raise ValueError(f"budget must be >= 0 and batch >= 1 (got {budget}, {batch})")
    current = np.array(start, dtype=np.int64)
    if current.shape != (graph.num_ops,):
        raise ValueError(f"start has shape {current.shape}; expected ({graph.num_ops},)")
    rules = constraints(graph, cluster)
    if rules.active:
        current = rules.project(current)
    estimate = estimate or PlacementEstimate(graph, cluster)
    start_estimate = best = float(estimate(current[None])[0])
    if graph.num_ops == 0 or cluster.num_devices < 2:  # no move exists
        return EstimateSearchResult(current, best, start_estimate, 0, 0)
    propose = propose or uniform_moves(graph.num_ops, cluster.num_devices)
    rng = np.random.default_rng(seed)
    used = moves = 0
    while used < budget:
        k = min(batch, budget - used)
        ops, devices = propose(rng, current, k)
        candidates = np.repeat(current[None], k, axis=0)
        candidates[np.arange(k), ops] = devices
        if rules.active:  # move whole enforced groups, and only where every moved op may run
            for r in range(k):
                moved = rules.members(ops[r])
                candidates[r] = current
                if rules.choices(moved)[devices[r]]:
                    candidates[r, moved] = devices[r]
                if rules.contiguous and rules.violations(candidates[r][None])[0]:
                    candidates[r] = current  # the stages would form a cycle: no move
        times = estimate(candidates)
        used += k
        j = int(np.argmin(times))
        if times[j] < best * (1.0 - 1e-9):
            current, best, moves = candidates[j], float(times[j]), moves + 1
    return EstimateSearchResult(current, best, start_estimate, used, moves)
