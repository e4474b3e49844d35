"""Per-graph reference decisions: the best heuristic, computed once per (graph, cluster, task).

The reference serves two purposes: it is the yardstick of the ``speedup`` and ``log_speedup``
rewards, and for the scheduling and fusion tasks it supplies the decisions the agent does not make
(the placement, and for fusion also the priorities).

``"best"`` (the default) tries every heuristic registered for the task at call time and keeps the
valid one with the lowest step time (an invalid one only if none is valid):

- placement: every placer in :data:`graphopt.baselines.placement.PLACERS`;
- scheduling: the best placement, with every scheduler of ``graphopt.baselines.scheduling``;
- fusion: the best placement and schedule, with every fuser of ``graphopt.baselines.fusion``;
- joint: the best fusion reference (it already combines the best of each part).

A placer name (e.g. ``"single"``) uses that placer instead, with topological order and no fusion.
Results are cached in-process, keyed by the graph's and cluster's fingerprints and the cost model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphopt.baselines.placement import PLACERS
from graphopt.compare import best_heuristic
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.typing import CostModel, Decision, Measurement

TASKS = ("placement", "scheduling", "fusion", "joint")


@dataclass(frozen=True)
class Reference:
    """The reference decision of one graph and what it measured."""

    decision: Decision
    measurement: Measurement
    name: str
    """Which heuristics produced it, e.g. ``"heft"`` or ``"heft+critical-path+xla"``."""


_CACHE: dict[tuple[str, str, str, str, int], Reference] = {}


def check_reference(reference: str) -> str:
    """``reference`` if it is ``"best"`` or a placer name; else a ValueError naming the choices."""
    if reference != "best" and reference not in PLACERS:
        raise ValueError(
            f"unknown reference {reference!r}; choose 'best' or a placer: {', '.join(PLACERS)}"
        )
    return reference


def reference_decision(
    graph: CompGraph, cluster: Cluster, task: str, cost_model: CostModel, reference: str = "best"
) -> Reference:
    """The reference decision for ``task`` (see the module docstring); ``"best"`` is
    :func:`graphopt.compare.best_heuristic`, the same staging as ``graphopt baselines``.

    Raises:
        ValueError: an unknown task or reference name.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of: {', '.join(TASKS)}")
    check_reference(reference)
    key = (graph.fingerprint, cluster.fingerprint, task, reference, id(cost_model))
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    if reference == "best":
        decision, measurement, name = best_heuristic(graph, cluster, task, cost_model)
    else:
        decision = Decision(placement=PLACERS[reference](graph, cluster))
        measurement, name = cost_model.evaluate(graph, cluster, decision), reference
    result = Reference(decision=decision, measurement=measurement, name=name)
    _CACHE[key] = result
    return result


def filled(decision: Decision, num_ops: int) -> Decision:
    """``decision`` with every missing array replaced by its default (zeros)."""
    zeros = np.zeros(num_ops, dtype=np.int64)
    return Decision(
        placement=zeros if decision.placement is None else decision.placement,
        priority=zeros if decision.priority is None else decision.priority,
        fusion=zeros if decision.fusion is None else decision.fusion,
    )
