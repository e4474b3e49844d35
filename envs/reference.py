"""Per-graph reference decisions: the best heuristic, computed once per (graph, cluster, task).

The reference serves two purposes: it is the yardstick of the ``speedup`` and ``log_speedup``
rewards, and for the scheduling and fusion tasks it supplies the decisions the agent does not make
(the placement, and for fusion also the priorities).

``"best"`` (the default) tries every heuristic registered for the task at call time and keeps the
valid one with the lowest step time (an invalid one only if none is valid):

- placement: every placer in :data:`graphopt.baselines.placement.PLACERS`;
- scheduling: the best placement, with every scheduler of ``graphopt.baselines.scheduling``
  (topological order when none is registered);
- fusion: the best placement and schedule, with every fuser of ``graphopt.baselines.fusion``
  (no fusion when none is registered);
- joint: the best fusion reference (it already combines the best of each part).

A placer name (e.g. ``"single"``) uses that placer instead, with topological order and no fusion.
Results are cached in-process, keyed by the graph's and cluster's fingerprints and the cost model.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphopt.baselines.placement import PLACERS
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
    """Which heuristics produced it, e.g. ``"split"`` or ``"split+critical-path+xla"``."""


_CACHE: dict[tuple[str, str, str, str, int], Reference] = {}


def _registry(module: str, attr: str) -> dict[str, Callable[..., Any]]:
    try:
        return dict(getattr(importlib.import_module(module), attr))
    except (ImportError, AttributeError):
        return {}


def _best(
    candidates: list[tuple[str, Decision]],
    graph: CompGraph,
    cluster: Cluster,
    cost_model: CostModel,
) -> Reference:
    best: Reference | None = None
    for name, decision in candidates:
        m = cost_model.evaluate(graph, cluster, decision)
        key = (not m.valid, m.step_time)
        if best is None or key < (not best.measurement.valid, best.measurement.step_time):
            best = Reference(decision=decision, measurement=m, name=name)
    assert best is not None
    return best


def reference_decision(
    graph: CompGraph, cluster: Cluster, task: str, cost_model: CostModel, reference: str = "best"
) -> Reference:
    """The reference decision for ``task`` (see the module docstring).

    Raises:
        ValueError: an unknown task or reference name.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of: {', '.join(TASKS)}")
    if reference != "best" and reference not in PLACERS:
        raise ValueError(
            f"unknown reference {reference!r}; choose 'best' or a placer: {', '.join(PLACERS)}"
        )
    key = (graph.fingerprint, cluster.fingerprint, task, reference, id(cost_model))
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    if reference != "best":
        result = _best(
            [(reference, Decision(placement=PLACERS[reference](graph, cluster)))],
            graph,
            cluster,
            cost_model,
        )
    else:
        placements = []
        for name, placer in PLACERS.items():
            try:
                placements.append((name, Decision(placement=placer(graph, cluster))))
            except ValueError:  # e.g. a memory-aware placer that finds no fit
                continue
        result = _best(placements, graph, cluster, cost_model)
        if task in ("scheduling", "fusion", "joint"):
            placement = result.decision.placement
            schedulers = _registry("graphopt.baselines.scheduling", "SCHEDULERS")
            candidates = [(result.name, result.decision)] + [
                (
                    f"{result.name}+{name}",
                    Decision(placement=placement, priority=fn(graph, cluster, placement)),
                )
                for name, fn in schedulers.items()
            ]
            result = _best(candidates, graph, cluster, cost_model)
        if task in ("fusion", "joint"):
            fusers = _registry("graphopt.baselines.fusion", "FUSERS")
            base = result.decision
            candidates = [(result.name, base)] + [
                (
                    f"{result.name}+{name}",
                    Decision(
                        placement=base.placement,
                        priority=base.priority,
                        fusion=fn(graph, cluster, base),
                    ),
                )
                for name, fn in fusers.items()
            ]
            result = _best(candidates, graph, cluster, cost_model)
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
