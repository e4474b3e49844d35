"""Per-graph reference decisions: the best heuristic, computed once per (graph, cluster, task).

The reference serves two purposes: it is the yardstick of the ``speedup`` and ``log_speedup``
rewards, and for the scheduling and fusion tasks it supplies the decisions the agent does not make
(the placement, and for fusion also the priorities).

``"best"`` (the default) is the task's best-heuristic chain, :mod:`graphopt.baselines.staged`
(the same as the heuristic rows of ``graphopt baselines``): the valid decision with the lowest
step time (an invalid one only if none is valid).

A placer name (e.g. ``"single"``) uses that placer instead, with topological order and no fusion.
Results are cached in-process, keyed by the task, the reference and what a measurement depends on:
under the simulator :func:`graphopt.sim.simulator.pair_key` (every :class:`~graphopt.sim.Simulator`
prices alike, so an environment made again, as each validation makes its own, finds the reference
of its graphs computed); under another cost model the graph's and cluster's fingerprints and that
cost model's identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphopt.baselines.placement import PLACERS
from graphopt.baselines.staged import best_heuristic
from graphopt.graph import CompGraph
from graphopt.hardware import Cluster
from graphopt.sim import Simulator
from graphopt.sim.simulator import pair_key
from graphopt.tasks import ONE_SHOT_TASKS, get_task
from graphopt.typing import CostModel, Decision, Measurement


@dataclass(frozen=True)
class Reference:
    """The reference decision of one graph and what it measured."""

    decision: Decision
    measurement: Measurement
    name: str
    """Which heuristics produced it, e.g. ``"heft"`` or ``"heft+critical-path+xla"``."""


_CACHE: dict[tuple[object, ...], Reference] = {}


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
    :func:`graphopt.baselines.staged.best_heuristic`.

    Raises:
        ValueError: an unknown task or reference name.
    """
    get_task(task, ONE_SHOT_TASKS)
    check_reference(reference)
    if type(cost_model) is Simulator:
        key: tuple[object, ...] = (task, reference, "simulator", *pair_key(graph, cluster))
    else:
        key = (task, reference, id(cost_model), graph.fingerprint, cluster.fingerprint)
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
