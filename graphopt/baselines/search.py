"""Black-box search at a fixed budget of simulator evaluations: random search and simulated annealing.

Both work for every task and spend *exactly* ``budget`` simulations (every decision simulated,
heuristic starts included, counts once), so that learned policies can be compared with them at
equal cost. Both are deterministic for a given ``seed`` (all randomness comes from
``numpy.random.default_rng(seed)``).

What a task searches; the other arrays stay those of the start decision:

=============  =================================================================================
task           searched arrays
=============  =================================================================================
placement      placement
scheduling     priority (levels in ``[0, num_priorities)``)
fusion         fusion bits
joint          all three
=============  =================================================================================

Start (``start=None``): the best heuristic decision of the task's chain
(:mod:`graphopt.baselines.staged`, as for the environments' reference), with the fusers that
decide without simulating (:data:`SEARCH_FUSERS`: none and xla). Each heuristic decision costs one
evaluation, counted against the budget; the best by ``(invalid, penalised cost)`` is the start. Random search needs a start only for the scheduling and
fusion tasks (to fix the placement); for placement and joint it samples from scratch, unless a start
is given, which is then evaluated first.

Invalid decisions. Illegal fusion costs ``inf`` (never accepted, never returned while a legal
decision was seen). Out of memory costs ``step_time * OOM_PENALTY * max_d(peak_d / capacity_d)``:
always more than twice its step time, and worse the further over capacity, so annealing can walk
out of an OOM region. The returned decision is the fastest *valid* one seen; when none was valid,
the one of least penalised cost (its measurement says why it is invalid).

Placement constraints (:mod:`graphopt.constraints`). Both searches keep to them: random
placements are projected onto the allowed devices, and annealing moves ops (with the rest of
their enforced colocation groups) only to devices every moved op may use; the start comes from
the placers, which keep to them. Without constraints the samples and moves are as before.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphopt.baselines.fusion import FUSERS
from graphopt.baselines.staged import Key, run_chain
from graphopt.constraints import Constraints
from graphopt.errors import InvalidArgument
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import PreparedGraph
from graphopt.sim.fusion_rules import fusion_mask
from graphopt.tasks import ONE_SHOT_TASKS, get_task
from graphopt.typing import Decision, FloatArray, IntArray, Measurement

OOM_PENALTY = 2.0
"""Factor on the step time of an out-of-memory decision (times its worst memory overshoot)."""


@dataclass(frozen=True)
class SearchResult:
    """What a search found.

    Attributes:
        decision: the best decision (every array filled in).
        measurement: its simulated measurement (recomputed once for the report: the decision was
            already evaluated during the search, so this is not counted).
        evaluations: simulator evaluations spent; always equal to the budget.
        history: ``(evaluations,)`` best valid step time after each evaluation (``inf`` before the
            first valid decision), for plotting search progress against evaluations.
        start: the start decision (fixed arrays came from it); ``None`` for random search from
            scratch.
    """

    decision: Decision
    measurement: Measurement
    evaluations: int
    history: FloatArray
    start: Decision | None


class _Budget:
    """Counts evaluations, keeps the best decision and the history; never exceeds the budget."""

    def __init__(self, prepared: PreparedGraph, budget: int) -> None:
        self.prepared = prepared
        self.budget = budget
        self.used = 0
        self.history = np.empty(budget)
        self.best_key = (True, math.inf)  # (invalid, step time or penalised cost)
        self.best: tuple[IntArray, IntArray, IntArray] | None = None
        self._best_step = math.inf

    @property
    def left(self) -> int:
        return self.budget - self.used

    def evaluate(
        self, placements: IntArray, priorities: IntArray, fusions: IntArray
    ) -> tuple[FloatArray, np.ndarray]:
        """Simulate a ``(B, N)`` batch; return each row's penalised cost (module docstring) and
        validity."""
        b = len(placements)
        assert 0 < b <= self.left, "search would exceed its evaluation budget"
        out = self.prepared.evaluate_batch(placements, priorities, fusions)
        overshoot = (out.peak_memory / self.prepared.capacity[None, :]).max(axis=1)
        with np.errstate(invalid="ignore"):  # inf * 0 overshoot of illegal rows, discarded
            cost = np.where(
                out.valid,
                out.step_time,
                np.where(out.status == 1, out.step_time * OOM_PENALTY * overshoot, np.inf),
            )
        for i in range(b):
            key = (not bool(out.valid[i]), float(out.step_time[i] if out.valid[i] else cost[i]))
            if key < self.best_key or self.best is None:
                self.best_key = key
                self.best = (placements[i].copy(), priorities[i].copy(), fusions[i].copy())
            if out.valid[i]:
                self._best_step = min(self._best_step, float(out.step_time[i]))
            self.history[self.used + i] = self._best_step
        self.used += b
        return cost, out.valid

    def result(self, start: Decision | None) -> SearchResult:
        assert self.used == self.budget and self.best is not None
        placement, priority, fusion = self.best
        decision = Decision(placement=placement, priority=priority, fusion=fusion)
        return SearchResult(
            decision=decision,
            measurement=self.prepared.evaluate(decision),
            evaluations=self.used,
            history=self.history,
            start=start,
        )


def _filled(decision: Decision, n: int) -> tuple[IntArray, IntArray, IntArray]:
    full = decision.filled(n)
    assert full.placement is not None and full.priority is not None and full.fusion is not None
    return full.placement, full.priority, full.fusion


SEARCH_FUSERS = {name: FUSERS[name] for name in ("none", "xla")}
"""The fusers of the search's start: those that decide without simulating (greedy fusion
simulates internally, evaluations the budget could not count)."""


def heuristic_start(
    graph: CompGraph, cluster: Cluster, task: str, budget: _Budget, fuse: bool = True
) -> tuple[Decision, float | None]:
    """The best heuristic decision for ``task`` (module docstring) and its penalised cost, each
    candidate one evaluation of ``budget``; stops when the budget runs out (cost ``None`` when
    nothing could be evaluated: the decision is then the all-default one). ``fuse=False`` leaves
    out the fusion stage."""
    n = graph.num_ops

    def score(decisions: Sequence[Decision]) -> list[Key]:
        todo = [_filled(d, n) for d in decisions[: budget.left]]
        if not todo:
            return []
        cost, valid = budget.evaluate(*(np.stack([a[k] for a in todo]) for k in range(3)))
        return [(not ok, x) for x, ok in zip(cost.tolist(), valid.tolist(), strict=True)]

    chain = run_chain(graph, cluster, task, score, fusers=SEARCH_FUSERS if fuse else {})
    if chain.best is None or chain.best.decision is None or chain.best.key is None:
        return Decision().filled(n), None
    return chain.best.decision.filled(n), chain.best.key[1]


def check_budget(budget: object, name: str = "budget", least: int = 0) -> int:
    """``budget`` (evaluations) if it is an integer of at least ``least``; the one check of a
    search budget, for the searches (``least`` 1), the comparisons (0: no search) and the
    command line's ``--budget``.

    Raises:
        InvalidArgument: anything else, naming the argument ``name``.
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise InvalidArgument(
            f"{{{name}}} must be an integer >= {least}, got {{got!r}}", got=budget
        )
    if budget < least:
        raise InvalidArgument(f"{{{name}}} must be >= {least}, got {{got}}", got=budget)
    return budget


def _searched(task: str, budget: int, graph: CompGraph, search_fusion: bool) -> frozenset[str]:
    """Validate the arguments; return the arrays searched: "placement", "priority", "fusion"."""
    get_task(task, ONE_SHOT_TASKS)
    check_budget(budget, least=1)
    if graph.num_ops == 0:
        raise ValueError(f"graph {graph.name!r} has no ops; there is nothing to search")
    if task == "joint":
        return frozenset(("placement", "priority", "fusion")[: 3 if search_fusion else 2])
    return frozenset({"scheduling": "priority"}.get(task, task).split())


def placement_groups(graph: CompGraph, by_layer: bool) -> IntArray:
    """Group id per op: its colocation group, else (``by_layer``) its layer, else the op alone."""
    index: dict[str, int] = {}
    keys = [
        c or (lay if by_layer else "") or f"\0{i}"
        for i, (c, lay) in enumerate(zip(graph.colocation, graph.layer, strict=True))
    ]
    return np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)


# ---------------------------------------------------------------------------------- random search
def _random_placements(
    rng: np.random.Generator, b: int, n: int, num_dev: int, groups: IntArray
) -> IntArray:
    """Half uniform per colocation group (else per op), half random contiguous splits of the
    topological order (``D - 1`` uniform cut points, stages dealt to a random device order)."""
    num_groups = int(groups.max()) + 1
    out = rng.integers(0, num_dev, size=(b, num_groups))[:, groups]
    split = rng.random(b) < 0.5
    for i in np.flatnonzero(split).tolist():
        cuts = np.sort(rng.integers(0, n + 1, size=num_dev - 1))
        stage = np.searchsorted(cuts, np.arange(n), side="right")
        out[i] = rng.permutation(num_dev)[stage]
    return out.astype(np.int64)


def random_search(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    budget: int,
    seed: int,
    start: Decision | None = None,
    num_priorities: int | None = None,
    batch_size: int = 256,
    search_fusion: bool = True,
) -> SearchResult:
    """Sample ``budget`` random decisions (minus the start's evaluations) and keep the best.

    Samples (for the searched arrays; the rest come from the start, or are the defaults):

    - placement: with probability 1/2 a uniform device per colocation group (per op when it has
      none), else a random contiguous split (``D - 1`` uniform cut points in topological order,
      stages dealt to a random permutation of the devices);
    - priority: uniform levels in ``[0, num_priorities)``;
    - fusion: ``q ~ U(0, 1)`` per sample, then each op whose bit the fusion mask allows
      (:func:`~graphopt.sim.fusion_rules.fusion_mask`) fused with probability ``q`` (bits that
      break the rules together are illegal; they cost their evaluation, see the module docstring).

    Decisions are simulated in batches of ``batch_size`` with ``evaluate_batch``.

    Args:
        graph: the computation graph.
        cluster: the devices and links.
        task: ``"placement"``, ``"scheduling"``, ``"fusion"`` or ``"joint"``.
        budget: simulator evaluations to spend (all of them).
        seed: random seed.
        start: fixes the arrays the task does not search, and is evaluated first; ``None``: the
            best heuristic for scheduling and fusion, nothing for placement and joint.
        num_priorities: priority levels (default: the number of ops).
        batch_size: decisions per ``evaluate_batch`` call.
        search_fusion: for "joint" only: ``False`` keeps the start's fusion bits (none without a
            start), e.g. to compare with the exact optimum, which does not fuse.

    Raises:
        ValueError: an unknown task, a budget below 1, or an empty graph.
    """
    searched = _searched(task, budget, graph, search_fusion)
    n, num_dev = graph.num_ops, cluster.num_devices
    levels = num_priorities or n
    rng = np.random.default_rng(seed)
    tracker = _Budget(PreparedGraph(graph, cluster), budget)
    if start is None and task in ("scheduling", "fusion"):
        start, _ = heuristic_start(graph, cluster, task, tracker)
    elif start is not None:
        tracker.evaluate(*(a[None, :] for a in _filled(start, n)))
    base = _filled(start or Decision(), n)
    groups = placement_groups(graph, by_layer=False)
    allowed = fusion_mask(graph) == 1  # never a bit that breaks the fusion rules on its own
    while tracker.left:
        b = min(batch_size, tracker.left)
        placements, priorities, fusions = (np.repeat(a[None, :], b, axis=0) for a in base)
        if "placement" in searched:
            placements = _random_placements(rng, b, n, num_dev, groups)
            rules = tracker.prepared.constraints
            if rules is not None:
                placements = np.stack([rules.project(row) for row in placements])
        if "priority" in searched:
            priorities = rng.integers(0, levels, size=(b, n))
        if "fusion" in searched:
            q = rng.random((b, 1))
            fusions = ((rng.random((b, n)) < q) & allowed).astype(np.int64)
        tracker.evaluate(placements, priorities, fusions)
    return tracker.result(start)


# ---------------------------------------------------------------------------------- annealing
def simulated_annealing(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    budget: int,
    seed: int,
    start: Decision | None = None,
    num_priorities: int | None = None,
    t_start: float = 3e-3,
    t_end: float = 1e-5,
    max_run: int | None = None,
    search_fusion: bool = True,
) -> SearchResult:
    """Simulated annealing from ``start`` (default: the best heuristic), one move per evaluation.

    Moves (uniform among those of the task; "joint" first picks placement, scheduling or fusion
    uniformly, fusion only when some op has a consumer):

    - placement: (a) one op to another device, (b) a contiguous run of ``2..max_run`` ops in
      topological order to one device (default ``max_run = max(2, N // D)``), or (c) a colocation
      group (else a layer) to another device;
    - scheduling: one op's priority to another level in ``[0, num_priorities)``;
    - fusion: flip one fusion bit (among the ops the fusion mask allows).

    Acceptance (Metropolis on log cost, so the temperature is relative): with ``c`` the penalised
    cost (module docstring), a move from ``c`` to ``c'`` is accepted when
    ``u < exp(-ln(c' / c) / T)``, ``u ~ U(0, 1)`` (always when ``c' <= c``; never when ``c' = inf``).
    At ``T = 0.003`` (the default start) a move 0.3% slower is accepted with probability ``1/e``.
    Temperature schedule: geometric from ``t_start`` at the first move to ``t_end`` at the last,
    ``T_k = t_start * (t_end / t_start) ** (k / (K - 1))`` over the ``K`` moves left after the start.
    (Defaults tuned on the tiny workloads on ``v100-nvlink-4`` at 1000-5000 evaluations: starting
    at 0.05 wandered away from strong heuristic starts and never beat them; 0.003 to 1e-5 improved
    them by 3-15%.) The result is the best decision seen, so never worse than the start.

    Args:
        graph: the computation graph.
        cluster: the devices and links.
        task: ``"placement"``, ``"scheduling"``, ``"fusion"`` or ``"joint"``.
        budget: simulator evaluations to spend (all of them, start included).
        seed: random seed.
        start: the initial decision (evaluated once); ``None``: the best heuristic (module
            docstring), its candidates counted against the budget.
        num_priorities: priority levels (default: the number of ops, or more if the start uses more).
        t_start: initial temperature (> 0).
        t_end: final temperature (> 0).
        max_run: longest run of ops moved at once.
        search_fusion: for "joint" only: ``False`` keeps the start's fusion bits (and leaves the
            "xla" stage out of the default start), e.g. to compare with the exact optimum.

    Raises:
        ValueError: an unknown task, a budget below 1, an empty graph, or a temperature <= 0.
    """
    searched = _searched(task, budget, graph, search_fusion)
    if not (t_start > 0 and t_end > 0):
        raise ValueError(f"temperatures must be > 0, got t_start={t_start}, t_end={t_end}")
    n, num_dev = graph.num_ops, cluster.num_devices
    rng = np.random.default_rng(seed)
    tracker = _Budget(PreparedGraph(graph, cluster), budget)
    cost: float | None = None
    if start is None:
        start, cost = heuristic_start(graph, cluster, task, tracker, fuse="fusion" in searched)
    state = _filled(start, n)
    levels = max(num_priorities or n, int(state[1].max()) + 1)
    if cost is None and tracker.left:
        cost = float(tracker.evaluate(*(a[None, :] for a in state))[0][0])
    groups = placement_groups(graph, by_layer=True)
    run = max(2, max_run or n // num_dev)
    fusible = np.flatnonzero(fusion_mask(graph))
    families = [f for f in ("placement", "priority", "fusion") if f in searched]
    if task == "joint" and len(fusible) == 0 and "fusion" in families:
        families.remove("fusion")
    moves = tracker.left
    for k in range(moves):
        temperature = t_start * (t_end / t_start) ** (k / max(moves - 1, 1))
        family = families[int(rng.integers(len(families)))]
        new = tuple(a.copy() for a in state)
        if family == "placement":
            _move_placement(rng, new[0], num_dev, groups, run, tracker.prepared.constraints)
        elif family == "priority" and levels > 1:
            i = int(rng.integers(n))
            new[1][i] = (new[1][i] + 1 + rng.integers(levels - 1)) % levels
        elif family == "fusion" and len(fusible):
            i = int(fusible[rng.integers(len(fusible))])
            new[2][i] ^= 1
        new_cost = float(tracker.evaluate(*(a[None, :] for a in new))[0][0])
        u = rng.random()
        assert cost is not None  # evaluated above whenever a move is left
        if new_cost <= cost or (
            math.isfinite(new_cost)
            and (
                not math.isfinite(cost)
                or (cost > 0 and u < math.exp(-math.log(new_cost / cost) / temperature))
            )
        ):
            state, cost = new, new_cost
    return tracker.result(start)


def _move_placement(
    rng: np.random.Generator,
    placement: IntArray,
    num_dev: int,
    groups: IntArray,
    run: int,
    rules: Constraints | None = None,
) -> None:
    """One placement move, in place (see :func:`simulated_annealing`). With ``rules``, the moved
    ops take their enforced colocation groups (blocks, under ``contiguous: true``) along and go
    to another device that all of them may use (none: no move); under ``contiguous: true`` the
    result is then projected onto a contiguous split (:meth:`Constraints.project`)."""
    if num_dev < 2:
        return
    n = len(placement)
    kind = int(rng.integers(3))
    if kind == 0:
        ops = np.array([rng.integers(n)])
    elif kind == 1:
        length = int(rng.integers(2, run + 1))
        first = int(rng.integers(max(n - length + 1, 1)))
        ops = np.arange(first, min(first + length, n))
    else:
        ops = np.flatnonzero(groups == groups[rng.integers(n)])
    current = placement[ops[0]]
    if rules is None:
        placement[ops] = (current + 1 + rng.integers(num_dev - 1)) % num_dev
        return
    ops = rules.members(ops)
    targets = np.flatnonzero(rules.choices(ops))
    targets = targets[targets != current]
    if len(targets):
        placement[ops] = targets[rng.integers(len(targets))]
        if rules.contiguous:  # the stages may now form a cycle: onto a contiguous split
            placement[:] = rules.project(placement)
