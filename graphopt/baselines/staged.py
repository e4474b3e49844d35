"""The best-heuristic chain: the one definition of "the best heuristic" of a task.

The environments' reference decision, the start of the searches and the heuristic rows of
``graphopt baselines`` / ``graphopt eval`` all come from :func:`run_chain`. The chain runs the
stages of the task (:data:`graphopt.tasks.TASKS`), each from the best decision of the stage
before:

1. placement: every placer of :data:`~graphopt.baselines.placement.PLACERS` (topological order,
   no fusion), named after the placer (``heft``);
2. scheduling: the best placement with every scheduler of
   :data:`~graphopt.baselines.scheduling.SCHEDULERS`, named ``best+NAME``;
3. fusion: the best placement and priorities with every fuser of
   :data:`~graphopt.baselines.fusion.FUSERS` (or the ``fusers`` given), named ``best+NAME``.

A heuristic that raises ``ValueError`` (a memory-aware placer that finds no fit) or
``ImportError`` (a missing optional package) yields no decision and is skipped. The candidates of
a stage are ranked by ``score``, the caller's hook: it receives the stage's decisions and returns
a key per decision, ``(invalid, cost)``, lower is better, for as many of them as it could afford
(a search counts each against its budget and stops when the budget runs out). The best candidate
of a stage is the one with the lowest key (the first of equals); the chain stops early when no
candidate of a stage could be scored. The chain's name joins the winners, for example
``heft+critical-path+xla``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from graphopt.baselines.fusion import FUSERS, Fuser
from graphopt.baselines.placement import PLACERS
from graphopt.baselines.scheduling import SCHEDULERS
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.tasks import get_task
from graphopt.typing import CostModel, Decision, IntArray, Measurement

Key = tuple[bool, float]
"""How candidates are ranked: ``(invalid, cost)``, lower is better."""
Placer = Callable[[CompGraph, Cluster], IntArray]
Scheduler = Callable[[CompGraph, Cluster, object], IntArray]
Score = Callable[[Sequence[Decision]], Sequence[Key]]
"""The chain's hook: keys for a prefix of the given decisions (all of them when it can)."""


@dataclass(frozen=True)
class Candidate:
    """One heuristic's decision in the chain.

    Attributes:
        method: the heuristic's name (``heft``, ``best+critical-path``).
        decision: its decision; ``None`` when the heuristic gave none (``error`` says why).
        error: why there is no decision (empty otherwise).
        wall_seconds: time the heuristic took to decide (the scoring not included).
        key: its score, ``None`` when it was not scored.
    """

    method: str
    decision: Decision | None
    error: str
    wall_seconds: float
    key: Key | None = None


@dataclass
class Chain:
    """What the chain produced: every candidate, stage by stage, and the best one."""

    stages: list[list[Candidate]] = field(default_factory=list)
    best: Candidate | None = None
    """The best candidate of the last stage reached; ``None`` when nothing could be scored."""
    name: str = ""
    """The winners' names joined by ``+`` (``heft+critical-path+xla``)."""

    @property
    def candidates(self) -> list[Candidate]:
        """Every candidate of every stage, in order."""
        return [c for stage in self.stages for c in stage]


def _decide(method: str, make: Callable[[], Decision]) -> Candidate:
    began = time.perf_counter()
    try:
        decision = make()
    except (ValueError, ImportError) as e:  # a placer that finds no fit, or lacks its package
        return Candidate(method, None, str(e), time.perf_counter() - began)
    return Candidate(method, decision, "", time.perf_counter() - began)


def _placed(placer: Placer, graph: CompGraph, cluster: Cluster) -> Decision:
    return Decision(placement=placer(graph, cluster))


def _scheduled(
    scheduler: Scheduler, graph: CompGraph, cluster: Cluster, base: Decision
) -> Decision:
    return Decision(placement=base.placement, priority=scheduler(graph, cluster, base.placement))


def _fused(fuser: Fuser, graph: CompGraph, cluster: Cluster, base: Decision) -> Decision:
    return Decision(base.placement, base.priority, fuser(graph, cluster, base))


def _stage(
    graph: CompGraph, cluster: Cluster, stage: str, base: Decision, fusers: Mapping[str, Fuser]
) -> list[Candidate]:
    """The candidates of one stage, built from the best decision so far (``base``)."""
    if stage == "placement":
        return [
            _decide(name, partial(_placed, placer, graph, cluster))
            for name, placer in PLACERS.items()
        ]
    if stage == "scheduling":
        return [
            _decide(f"best+{name}", partial(_scheduled, scheduler, graph, cluster, base))
            for name, scheduler in SCHEDULERS.items()
        ]
    return [
        _decide(f"best+{name}", partial(_fused, fuser, graph, cluster, base))
        for name, fuser in fusers.items()
    ]


def run_chain(
    graph: CompGraph,
    cluster: Cluster,
    task: str,
    score: Score,
    fusers: Mapping[str, Fuser] | None = None,
) -> Chain:
    """Run the chain of ``task`` (module docstring), ranking each stage with ``score``.

    Args:
        fusers: the fusion stage's fusers (default: every fuser of ``FUSERS``).

    Raises:
        ValueError: an unknown task.
    """
    stages = get_task(task).stages
    chain = Chain()
    base = Decision()
    for stage in stages:
        made = _stage(graph, cluster, stage, base, FUSERS if fusers is None else fusers)
        ready = [c for c in made if c.decision is not None]
        keys = list(score([c.decision for c in ready if c.decision is not None]))
        scored = {id(c): k for c, k in zip(ready, keys, strict=False)}
        made = [
            Candidate(c.method, c.decision, c.error, c.wall_seconds, scored.get(id(c)))
            for c in made
        ]
        chain.stages.append(made)
        ranked = [c for c in made if c.key is not None]
        if not ranked:
            break
        best = min(ranked, key=lambda c: c.key or (True, 0.0))
        assert best.decision is not None
        chain.best, base = best, best.decision
        chain.name += best.method.removeprefix("best") if chain.name else best.method
    return chain


class MeasuringScore:
    """The chain's hook for callers that price with a cost model: each decision is measured once,
    ranked by ``(not valid, step time)``, and its measurement kept in :attr:`measurements`
    (keyed by the decision's ``id``)."""

    def __init__(self, cost_model: CostModel, graph: CompGraph, cluster: Cluster) -> None:
        self.cost_model, self.graph, self.cluster = cost_model, graph, cluster
        self.measurements: dict[int, Measurement] = {}

    def __call__(self, decisions: Sequence[Decision]) -> list[Key]:
        keys = []
        for d in decisions:
            m = self.cost_model.evaluate(self.graph, self.cluster, d)
            self.measurements[id(d)] = m
            keys.append((not m.valid, m.step_time))
        return keys

    def of(self, candidate: Candidate) -> Measurement:
        """The measurement of a scored candidate."""
        assert candidate.decision is not None
        return self.measurements[id(candidate.decision)]


def best_heuristic(
    graph: CompGraph, cluster: Cluster, task: str, cost_model: CostModel
) -> tuple[Decision, Measurement, str]:
    """The best heuristic decision for ``task`` by ``cost_model``, its measurement and the chain's
    name: the environments' reference decision.

    Raises:
        ValueError: an unknown task, or no heuristic gave a decision.
    """
    chain, score, best = measure_chain(graph, cluster, task, cost_model)
    assert best.decision is not None
    return best.decision, score.of(best), chain.name


def measure_chain(
    graph: CompGraph, cluster: Cluster, task: str, cost_model: CostModel
) -> tuple[Chain, MeasuringScore, Candidate]:
    """The chain of ``task`` with every decision measured by ``cost_model``, the score that
    holds the measurements, and the best candidate.

    Raises:
        ValueError: an unknown task, or no heuristic gave a decision (each one's error named).
    """
    score = MeasuringScore(cost_model, graph, cluster)
    chain = run_chain(graph, cluster, task, score)
    if chain.best is None or chain.best.decision is None:
        errors = "; ".join(f"{c.method}: {c.error}" for c in chain.candidates if c.error)
        raise ValueError(f"no heuristic gave a decision for {graph.name} ({errors})")
    return chain, score, chain.best
